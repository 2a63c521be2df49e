// WikiText loader: token counts of the shipped WikiText-2 (published sizes), vocabulary rules,
// the binary cache, and block sampling.
#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

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

TEST_CASE("a cached split's windows read with pread equal its mapped ids, subspans included") {
  auto dir = makeCorpus("cache-pread", " a b c \n b c d e \n a \n", " a \n", " b \n");
  loadWikiText(dir);  // writes the cache
  Corpus cached = loadWikiText(dir);
  REQUIRE(cached.train.size() == 11);                                       // words and one <eos> per line
  std::vector<int32_t> expected(cached.train.begin(), cached.train.end());  // through the mapping
  std::vector<int32_t> got(11, -1);
  cached.train.copy(0, 11, got.data());
  CHECK(got == expected);
  std::vector<int32_t> window(3, -1);
  cached.train.subspan(4, 6).copy(2, 3, window.data());  // ids 6, 7, 8 of the split
  CHECK(window == std::vector<int32_t>(expected.begin() + 6, expected.begin() + 9));
  std::vector<int32_t> plain{5, 6, 7, 8};  // a vector's view copies from memory
  TokenSpan(plain).subspan(1, 3).copy(1, 2, window.data());
  CHECK(window[0] == 7);
  CHECK(window[1] == 8);
}

TEST_CASE("a changed file invalidates the cache") {
  auto dir = makeCorpus("cache", " a b \n", " a \n", " b \n");
  CHECK(loadWikiText(dir).train.size() == 3);
  std::ofstream(dir / "wiki.train.tokens") << " a b c d \n";
  CHECK(loadWikiText(dir).train.size() == 5);
}

TEST_CASE("the cache is stamped by content: a copy keeps it, an edit hidden from size and mtime does not") {
  auto dir = makeCorpus("cache-stamp", " a b \n b \n", " a \n", " b \n");
  auto train = dir / "wiki.train.tokens";
  auto cache = dir / ".xtrap-cache.bin";
  CHECK(loadWikiText(dir).vocab.word(0) == "b");  // b 2, <eos> 2 (b first), a 1
  auto written = fs::last_write_time(cache);
  // Another machine: same bytes, other modification times. The cache is used, not rewritten.
  fs::last_write_time(train, fs::last_write_time(train) + std::chrono::hours(1));
  CHECK(loadWikiText(dir).vocab.word(0) == "b");
  CHECK(fs::last_write_time(cache) == written);
  // Same size, other bytes, and the mtime set back too: the content hash still tells.
  auto mtime = fs::last_write_time(train);
  std::ofstream(train) << " b a \n a \n";
  fs::last_write_time(train, mtime);
  CHECK(loadWikiText(dir).vocab.word(0) == "a");
}

TEST_CASE("a damaged cache is rebuilt, never trusted") {
  auto dir = makeCorpus("cache-damaged", " a b \n b \n", " a \n", " b \n");
  Corpus first = loadWikiText(dir);
  std::vector<int32_t> expected = first.train.toVector();
  auto cache = dir / ".xtrap-cache.bin";
  for (auto offset : {uintmax_t(3), fs::file_size(cache) - 2}) {  // the magic; the last id
    {
      std::fstream f(cache, std::ios::in | std::ios::out | std::ios::binary);
      f.seekp(std::streamoff(offset));
      f.put('\x7f');
    }
    Corpus again = loadWikiText(dir);
    CHECK(again.train == expected);
    CHECK(again.digest == first.digest);
  }
  fs::resize_file(cache, fs::file_size(cache) - 4);
  CHECK(loadWikiText(dir).train == expected);
}

TEST_CASE("the parallel parser matches a line-by-line count on a text of many chunks") {
  // 20,000 lines of words drawn from 300 types: far over the 64 KiB below which the text is one chunk.
  std::string text;
  uint64_t state = 12345;
  std::vector<std::string> lines;
  for (int line = 0; line < 20000; ++line) {
    std::string l;
    for (int k = 0; k < 1 + line % 7; ++k) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      l += " w" + std::to_string((state >> 33) % 300);
    }
    text += l + " \n";
    lines.push_back(l);
  }
  // Reference: counts and first appearances, one token at a time.
  std::map<std::string, std::pair<int64_t, int64_t>> seen;  // word -> (count, first index)
  std::vector<std::string> tokens;
  for (const auto& l : lines) {
    std::istringstream words(l);
    for (std::string w; words >> w;) tokens.push_back(w);
    tokens.push_back("<eos>");
  }
  for (size_t i = 0; i < tokens.size(); ++i) {
    auto it = seen.try_emplace(tokens[i], 0, int64_t(i)).first;
    ++it->second.first;
  }
  std::vector<std::string> order;
  for (const auto& [w, e] : seen) order.push_back(w);
  std::sort(order.begin(), order.end(), [&](const std::string& a, const std::string& b) {
    return seen[a].first != seen[b].first ? seen[a].first > seen[b].first : seen[a].second < seen[b].second;
  });
  Vocabulary vocab = buildVocabulary(text);
  REQUIRE(vocab.size() == int64_t(order.size()) + 1);  // + <unk>
  for (size_t k = 0; k < order.size(); ++k) CHECK(vocab.word(int32_t(k)) == order[k]);
  auto ids = tokenize(text, vocab);
  REQUIRE(ids.size() == tokens.size());
  bool same = true;
  for (size_t i = 0; i < ids.size(); ++i) same = same && vocab.word(ids[i]) == tokens[i];
  CHECK(same);
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

TEST_CASE("MLM selection: exactly int(p*n + u) tokens, uniformly without replacement") {
  for (uint64_t seed = 0; seed < 50; ++seed) {
    auto s = exactCountSelection(seed, 100, 0.15);  // p*n = 15: always 15
    REQUIRE(s.size() == 15);
    for (size_t k = 0; k < s.size(); ++k) {
      CHECK((s[k] >= 0 && s[k] < 100));
      if (k > 0) CHECK(s[k] > s[k - 1]);  // sorted, no repeats
    }
    CHECK(exactCountSelection(seed, 20, 0.5).size() == 10);
    CHECK(exactCountSelection(seed, 7, 1.0).size() == 7);
    CHECK(exactCountSelection(seed, 7, 0.0).empty());
  }
  // p*n = 1.5: 1 or 2 tokens, 2 with probability 0.5 (u >= 0.5)
  int64_t two = 0, draws = 4000;
  std::vector<int64_t> hits(10, 0);
  for (int64_t seed = 0; seed < draws; ++seed) {
    auto s = exactCountSelection(uint64_t(seed), 10, 0.15);
    REQUIRE((s.size() == 1 || s.size() == 2));
    two += s.size() == 2;
    for (int64_t o : s) ++hits[size_t(o)];
  }
  CHECK(double(two) / double(draws) == Approx(0.5).margin(0.04));  // sd 0.008
  // uniform: each offset is chosen with probability 1.5 / 10 (sd of a count ~ 23)
  for (int64_t h : hits) CHECK(double(h) == Approx(0.15 * double(draws)).margin(130));
}

TEST_CASE("MLM corruption: 80/10/10, replacements only from the real words, a pure function of (seed, position)") {
  const int64_t n = 200000;
  const std::vector<int32_t> realWords{3, 5, 8, 13};  // e.g. a vocabulary whose other ids are specials
  int64_t mask = 0, random = 0, keep = 0;
  for (int64_t p = 0; p < n; ++p) {
    MaskChoice c = mlmCorruption(42, p, realWords);
    if (c.action == MaskAction::Mask) ++mask;
    if (c.action == MaskAction::Random) {
      ++random;
      CHECK(std::find(realWords.begin(), realWords.end(), c.randomToken) != realWords.end());
    }
    if (c.action == MaskAction::Keep) ++keep;
  }
  // Binomial standard deviation at n = 200k is < 0.1%; tolerances are > 5 sigma.
  CHECK(double(mask) / n == Approx(0.8).margin(0.005));
  CHECK(double(random) / n == Approx(0.1).margin(0.005));
  CHECK(double(keep) / n == Approx(0.1).margin(0.005));
  MaskChoice a = mlmCorruption(42, 12345, realWords), b = mlmCorruption(42, 12345, realWords);
  CHECK(a.action == b.action);
  CHECK(a.randomToken == b.randomToken);
  Vocabulary v({"the", "<eos>", ",", "<unk>", "of"});
  v.addSpecial(Vocabulary::kMask);
  v.addSpecial(Vocabulary::kBos);
  CHECK(v.realWords() == std::vector<int32_t>{0, 2, 4});  // no <eos>, <unk>, <mask>, <bos>
}

TEST_CASE("evaluation masks: exact count per aligned block, the same set whatever the window") {
  // blocks [0,64) ... [896,960) and the partial [960,1000): int(0.25 * 64 + u) = 16 each, 10 in the last
  const int64_t N = 1000, B = 64;
  auto all = alignedBlockSelection(7, 0.25, B, N, 0, N);
  CHECK(all.size() == 15 * 16 + 10);
  for (int64_t k = 0; k * B < N; ++k) {
    auto inBlock = std::count_if(all.begin(), all.end(), [&](int64_t p) { return p / B == k; });
    CHECK(inBlock == (k < 15 ? 16 : 10));
  }
  for (int64_t Lvalid : {16, 64, 100, 333, 1000}) {  // the union over any tiling is the same set
    std::vector<int64_t> tiled;
    for (int64_t s = 0; s < N; s += Lvalid) {
      auto part = alignedBlockSelection(7, 0.25, B, N, s, std::min(N, s + Lvalid));
      for (int64_t p : part) CHECK((p >= s && p < s + Lvalid));
      tiled.insert(tiled.end(), part.begin(), part.end());
    }
    CHECK(tiled == all);
  }
}
