// --Lvalid grammar and the evaluation windows (which tokens each window scores).
#include <catch2/catch.hpp>
#include <set>

#include "eval/lvalid_range.h"
#include "eval/windows.h"

using namespace xtrap;
using V = std::vector<int64_t>;

TEST_CASE("Lvalid ranges: valid input") {
  CHECK(parseLvalidRange("512") == V{512});
  CHECK(parseLvalidRange("512..4096") == V{512, 1024, 2048, 4096});
  CHECK(parseLvalidRange("512..12000") == V{512, 1024, 2048, 4096, 8192, 12000});  // B always included
  CHECK(parseLvalidRange("100..130:10") == V{100, 110, 120, 130});
  CHECK(parseLvalidRange("100..125:10") == V{100, 110, 120, 125});
  CHECK(parseLvalidRange("100..1000*3") == V{100, 300, 900, 1000});
  CHECK(parseLvalidRange("10..20*1.5") == V{10, 15, 20});  // 10, 15, 22.5 > 20 stops; 20 added
  CHECK(parseLvalidRange("4096,512,1024") == V{512, 1024, 4096});
  CHECK(parseLvalidRange("512..1024,768,100..110:5") == V{100, 105, 110, 512, 768, 1024});
  CHECK(parseLvalidRange("7..7") == V{7});
}

TEST_CASE("Lvalid ranges: bad input is rejected quoting the item") {
  CHECK_THROWS_WITH(parseLvalidRange("abc"), Catch::Contains("'abc'"));
  CHECK_THROWS_WITH(parseLvalidRange("0"), Catch::Contains("'0'"));
  CHECK_THROWS_WITH(parseLvalidRange("-5"), Catch::Contains("'-5'"));
  CHECK_THROWS_WITH(parseLvalidRange("4096..512"), Catch::Contains("descending"));
  CHECK_THROWS_WITH(parseLvalidRange("512..1024:0"), Catch::Contains("'512..1024:0'"));
  CHECK_THROWS_WITH(parseLvalidRange("512..1024*1"), Catch::Contains("factor must be > 1"));
  CHECK_THROWS_WITH(parseLvalidRange("512..1024*x"), Catch::Contains("bad factor"));
  CHECK_THROWS_WITH(parseLvalidRange("99999999999"), Catch::Contains("'99999999999'"));
  CHECK_THROWS_WITH(parseLvalidRange("100000000"), Catch::Contains("above"));
  CHECK_THROWS_WITH(parseLvalidRange("512,,1024"), Catch::Contains("empty item"));
  CHECK_THROWS_WITH(parseLvalidRange(""), Catch::Contains("empty item"));
  CHECK_THROWS_WITH(parseLvalidRange("1..16000000:1"), Catch::Contains("more than 100000"));
  CHECK_THROWS_WITH(parseLvalidRange("512.."), Catch::Contains("'512..'"));
}

namespace {
// Every target x[0..N-1] must be scored exactly once (windows index x' = <eos> x, so the input at
// window position p is x'[start + p] and its target is x[start + p]); returns the context each
// target had, <eos> included.
std::vector<int64_t> contextPerTarget(const std::vector<EvalWindow>& windows, int64_t N) {
  std::vector<int64_t> context(static_cast<size_t>(N), -1);
  for (const auto& w : windows)
    for (int64_t p = w.scoreFrom; p < w.length; ++p) {
      int64_t target = w.start + p;
      REQUIRE(target < N);
      REQUIRE(context[target] == -1);  // scored once
      context[target] = p + 1;         // tokens visible when predicting it
    }
  for (int64_t t = 0; t < N; ++t) REQUIRE(context[t] >= 1);
  return context;
}
}  // namespace

TEST_CASE("decoder windows: non-overlapping, N targets for N tokens") {
  auto w = decoderWindows(11, 4, 4);  // 11 targets: windows of 4, 4, and a partial 3 (kept)
  CHECK(w == std::vector<EvalWindow>{{0, 4, 0}, {4, 4, 0}, {8, 3, 0}});
  auto ctx = contextPerTarget(w, 11);
  CHECK(ctx[0] == 1);  // x[0] is predicted from <eos> alone
  CHECK(ctx[4] == 1);  // the first target of the second window from x[3] alone
}

TEST_CASE("decoder windows: sliding scores each token once with >= Lvalid - S context") {
  auto w = decoderWindows(11, 4, 2);
  CHECK(w == std::vector<EvalWindow>{{0, 4, 0}, {2, 4, 2}, {4, 4, 2}, {6, 4, 2}, {8, 3, 2}});
  auto ctx = contextPerTarget(w, 11);
  for (int64_t t = 4; t < 11; ++t) CHECK(ctx[t] >= 4 - 2 + 1);
  SECTION("stride 1: every token after the first window sees Lvalid tokens") {
    auto c1 = contextPerTarget(decoderWindows(50, 8, 1), 50);
    for (int64_t t = 0; t < 8; ++t) CHECK(c1[t] == t + 1);
    for (int64_t t = 8; t < 50; ++t) CHECK(c1[t] == 8);
  }
  SECTION("stride = Lvalid is exactly the non-overlapping set") {
    auto w64 = decoderWindows(1000, 64, 64);
    CHECK(w64.size() == 16);  // 15 full windows + 40 targets
    CHECK(w64.back() == EvalWindow{960, 40, 0});
    for (const auto& win : w64) CHECK(win.scoreFrom == 0);
    contextPerTarget(w64, 1000);
  }
}

TEST_CASE("encoder windows: each position scored in its most central window") {
  auto w = encoderWindows(10, 4, 2);  // [0,4) [2,6) [4,8) [6,10)
  CHECK(w == std::vector<EvalWindow>{{0, 4, 0}, {2, 4, 0}, {4, 4, 0}, {6, 4, 0}});
  CHECK(bestEncoderWindow(w, 2, 0) == 0);  // only window 0 holds it
  CHECK(bestEncoderWindow(w, 2, 2) == 0);  // margin 1 in window 0 (vs 0 in window 1): window 0
  CHECK(bestEncoderWindow(w, 2, 3) == 1);  // margin 1 in window 1, 0 in window 0
  CHECK(bestEncoderWindow(w, 2, 9) == 3);
  auto nonOverlap = encoderWindows(10, 4, 4);
  CHECK(nonOverlap == std::vector<EvalWindow>{{0, 4, 0}, {4, 4, 0}, {8, 2, 0}});
}
