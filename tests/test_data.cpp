// WikiText loader: token counts of the shipped WikiText-2 (published sizes), vocabulary rules,
// the binary cache, and block sampling.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "data/block_sampler.h"
#include "data/mlm_masking.h"
#include "data/wikitext.h"

using namespace xtrap;
namespace fs = std::filesystem;

namespace {
fs::path makeCorpus(const std::string& name, const std::string& train, const std::string& valid,
                    const std::string& test) {
  auto dir = fs::temp_directory_path() / ("xtrap-test-" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::ofstream(dir / "wiki.train.tokens") << train;
  std::ofstream(dir / "wiki.valid.tokens") << valid;
  std::ofstream(dir / "wiki.test.tokens") << test;
  return dir;
}
}  // namespace

TEST_CASE("shipped WikiText-2 has the published token counts (words + <eos> per line)") {
  Corpus c = loadWikiText(defaultDataDir());
  CHECK(c.train.size() == 2088628);
  CHECK(c.valid.size() == 217646);
  CHECK(c.test.size() == 245569);
  CHECK(c.vocab.size() == 33278);                   // 33,277 distinct words + <eos>
  CHECK(c.vocab.word(c.valid.front()) == "<eos>");  // the file starts with a blank line
  SECTION("the second load comes from the cache and is identical") {
    Corpus again = loadWikiText(defaultDataDir());
    CHECK(again.train == c.train);
    CHECK(again.valid == c.valid);
    CHECK(again.vocab.words() == c.vocab.words());
  }
}

TEST_CASE("vocabulary: train only, frequency order, unknown words map to <unk>") {
  auto dir = makeCorpus("vocab", " b a b \n c b a \n", " a z \n", " zz b \n");
  Corpus c = loadWikiText(dir);
  // counts: b 3, a 2, <eos> 2, c 1; the a/<eos> tie goes to the first seen (a at 1, <eos> at 3)
  REQUIRE(c.vocab.size() == 5);  // b a <eos> c + <unk> appended
  CHECK(c.vocab.word(0) == "b");
  CHECK(c.vocab.word(1) == "a");
  CHECK(c.vocab.word(2) == "<eos>");
  CHECK(c.vocab.word(3) == "c");
  CHECK(c.vocab.word(4) == "<unk>");
  CHECK(c.train == std::vector<int32_t>{0, 1, 0, 2, 3, 0, 1, 2});
  CHECK(c.valid == std::vector<int32_t>{1, 4, 2});
  CHECK(c.test == std::vector<int32_t>{4, 0, 2});
}

TEST_CASE("loader errors name the missing piece") {
  CHECK_THROWS_WITH(loadWikiText("/nonexistent/xtrap"), Catch::Contains("data directory not found"));
  auto dir = makeCorpus("missing", " a \n", " a \n", " a \n");
  fs::remove(dir / "wiki.test.tokens");
  CHECK_THROWS_WITH(loadWikiText(dir), Catch::Contains("wiki.test.tokens"));
}

TEST_CASE("a changed file invalidates the cache") {
  auto dir = makeCorpus("cache", " a b \n", " a \n", " b \n");
  CHECK(loadWikiText(dir).train.size() == 3);
  std::ofstream(dir / "wiki.train.tokens") << " a b c d \n";
  CHECK(loadWikiText(dir).train.size() == 5);
}

TEST_CASE("block sampler: random starts stay in range, contiguous covers every block once per epoch") {
  BlockSampler random(100, 11, false, 7);
  for (int64_t s : random.next(1000)) CHECK((s >= 0 && s <= 89));
  BlockSampler contiguous(100, 10, true, 7);
  auto starts = contiguous.next(10);
  std::sort(starts.begin(), starts.end());
  CHECK(starts == std::vector<int64_t>{0, 10, 20, 30, 40, 50, 60, 70, 80, 90});
  SECTION("state round-trips: a restored sampler continues identically") {
    BlockSampler a(100, 10, true, 3);
    a.next(4);
    BlockSampler b(100, 10, true, 99);
    b.restore(a.state());
    CHECK(a.next(25) == b.next(25));
  }
}

TEST_CASE("MLM masking: 15% selected, 80/10/10, a pure function of (seed, position)") {
  const int64_t n = 200000;
  int64_t selected = 0, mask = 0, random = 0, keep = 0;
  for (int64_t p = 0; p < n; ++p) {
    MaskChoice c = mlmMaskChoice(42, p, 0.15, 1000);
    if (c.action == MaskAction::NotSelected) continue;
    ++selected;
    if (c.action == MaskAction::Mask) ++mask;
    if (c.action == MaskAction::Random) {
      ++random;
      CHECK((c.randomToken >= 0 && c.randomToken < 1000));
    }
    if (c.action == MaskAction::Keep) ++keep;
  }
  // Binomial standard deviation at n = 200k is ~0.08%; tolerances are > 5 sigma.
  CHECK(double(selected) / n == Approx(0.15).margin(0.005));
  CHECK(double(mask) / selected == Approx(0.8).margin(0.01));
  CHECK(double(random) / selected == Approx(0.1).margin(0.01));
  CHECK(double(keep) / selected == Approx(0.1).margin(0.01));
  MaskChoice a = mlmMaskChoice(42, 12345, 0.15, 1000), b = mlmMaskChoice(42, 12345, 0.15, 1000);
  CHECK(a.action == b.action);
  CHECK(a.randomToken == b.randomToken);
}
