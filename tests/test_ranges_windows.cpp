// --Lvalid grammar and the evaluation windows (which tokens each window scores).
#include <catch2/catch.hpp>
#include <set>

#include "data/text_tokens.h"
#include "eval/lvalid_range.h"
#include "eval/window_protocol.h"
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

namespace {
using PW = std::vector<ProtocolWindow>;
int64_t scoredCount(const PW& windows) {
  int64_t n = 0;
  for (const auto& w : windows) n += w.scoreTo - w.scoreFrom;
  return n;
}
}  // namespace

// N = 20 text tokens, Lvalid = 8; x' = c x has 21 tokens. The counts below are worked out by hand
// from each tool's loop (window_protocol.h); tests/protocol_check.py replays the tools' code.
TEST_CASE("window protocols: the tokens each tool scores, counted by hand") {
  WindowPlan plan;
  plan.Lvalid = 8;
  // xtrap, non-overlapping: windows at 0, 8, 16 (the last of 4), every token once.
  CHECK(protocolWindows(plan, 20) == PW{{0, 8, 0, 8, false}, {8, 8, 0, 8, false}, {16, 4, 0, 4, false}});

  // llama.cpp: floor(21 / 8) = 2 chunks, positions 4, 5, 6 of each scored (8 - 1 - 4 = 3 a chunk):
  // x[4..6] and x[12..14], 6 tokens; x'[0] and x'[8] replaced by c; x'[16..20] dropped.
  plan.protocol = WindowProtocol::LlamaCpp;
  PW llama = protocolWindows(plan, 20);
  CHECK(llama == PW{{0, 8, 4, 7, true}, {8, 8, 4, 7, true}});
  CHECK(scoredCount(llama) == 6);
  CHECK_THROWS_WITH(protocolWindows(plan, 14), Catch::Contains("at least 2 * Lvalid = 16"));  // 15 tokens
  CHECK(protocolWindows(plan, 15).size() == 2);                                               // exactly 16

  // lm-eval, documents x[0, 5) and x[5, 20): the first alone in one window (c + x[0..3] predicts
  // x[0..4]); the second: c + x[5..11] predicts x[5..12], then x[12..19] (the 8 tokens before its
  // last target x[19]) predicts its last 7, x[13..19]. 20 tokens, each once.
  plan.protocol = WindowProtocol::LmEval;
  plan.documentStarts = {0, 5};
  PW lmEval = protocolWindows(plan, 20);
  CHECK(lmEval == PW{{0, 5, 0, 5, true}, {5, 8, 0, 8, true}, {12, 8, 1, 8, false}});
  CHECK(scoredCount(lmEval) == 20);

  // strided without bos, S = 4: windows x[0,8) x[4,12) x[8,16) x[12,20); the first predicts x[1..7]
  // (7: its first token is never a label), the others their last 4: 19 tokens, x[0] never.
  plan.protocol = WindowProtocol::Strided;
  plan.documentStarts.clear();
  plan.stride = 4;
  PW strided = protocolWindows(plan, 20);
  CHECK(strided == PW{{1, 8, 0, 7, false}, {5, 8, 3, 7, false}, {9, 8, 3, 7, false}, {13, 8, 3, 7, false}});
  CHECK(scoredCount(strided) == 19);

  // strided with bos (YaRN): c + 7 tokens: c x[0,7) scores 7, then c x[4,11), c x[8,15), c x[12,19)
  // their last 4, and c x[16,20) its last 1 (x[19]): 20 tokens.
  plan.bos = true;
  PW yarn = protocolWindows(plan, 20);
  CHECK(yarn ==
        PW{{0, 8, 0, 7, true}, {4, 8, 3, 7, true}, {8, 8, 3, 7, true}, {12, 8, 3, 7, true}, {16, 5, 3, 4, true}});
  CHECK(scoredCount(yarn) == 20);
  plan.stride = 8;
  CHECK_THROWS_WITH(protocolWindows(plan, 20), Catch::Contains("1 <= stride <= 7"));
  CHECK_THROWS_WITH(parseWindowProtocol("hf"), Catch::Contains("xtrap, llama.cpp, lm-eval, strided"));
}

// len(re.split(r"\s+", page)) and len(page.encode("utf-8")), worked out by hand (and by Python).
TEST_CASE("lm-eval protocol: a page's words and bytes as the harness counts them") {
  auto counts = [](std::string_view page) {
    TextCounts c = harnessPageCounts(page);
    return std::pair<int64_t, int64_t>{c.words, c.bytes};
  };
  using P = std::pair<int64_t, int64_t>;
  CHECK(counts(" = Title = \n \n a b c \n \n") == P{8, 24});  // "" = Title = a b c ""
  CHECK(counts("a  b") == P{2, 4});
  CHECK(counts("") == P{1, 0});
  CHECK(counts("x\xc2\xa0y z") == P{3, 6});  // U+00A0 separates
  CHECK(counts(" ") == P{2, 1});
  CHECK(counts("caf\xc3\xa9 au lait\n") == P{4, 14});
  CHECK(counts("a\x1c"
               "b\x1f") == P{3, 4});  // Python's \s has the ASCII separators; White_Space does not
}
