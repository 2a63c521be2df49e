// eval --kl-base (eval/kl_divergence.h) and eval --protocol through the model (eval/window_protocol.h;
// the windows themselves: test_ranges_windows.cpp and tests/protocol_check.py).
#include <torch/torch.h>  // before Catch: its CHECK, not glog's, whatever the build's precompiled header

#include <catch2/catch.hpp>
#include <cmath>
#include <nlohmann/json.hpp>

#include "eval/evaluate_run.h"
#include "eval/kl_divergence.h"
#include "test_support.h"

using namespace xtrap;
using namespace xtrap::test;

TEST_CASE("KL divergence: hand-computed pairs of tiny distributions") {
  // Row 0: p = (1/2, 1/4, 1/4), q = (1/4, 1/2, 1/4): KL(p || q) = 1/2 ln 2 + 1/4 ln 1/2 = ln 2 / 4,
  // top tokens 0 and 1. Row 1: p = q = (0.7, 0.2, 0.1): 0, same top. Row 2: p = (1, 0, 0),
  // q = (1/2, 1/4, 1/4): ln 2 (the zero-probability tokens add nothing), same top.
  auto p = torch::tensor({0.5, 0.25, 0.25, 0.7, 0.2, 0.1, 1.0, 0.0, 0.0}, torch::kFloat64).reshape({3, 3}).log();
  auto q = torch::tensor({0.25, 0.5, 0.25, 0.7, 0.2, 0.1, 0.5, 0.25, 0.25}, torch::kFloat64).reshape({3, 3}).log();
  KlRows k = klFromLogProbs(p, q, torch::tensor({1, 2, 0}));
  CHECK(k.kl[0].item<double>() == Approx(std::log(2.0) / 4).epsilon(1e-12));
  CHECK(k.kl[1].item<double>() == Approx(0.0).margin(1e-15));
  CHECK(k.kl[2].item<double>() == Approx(std::log(2.0)).epsilon(1e-12));
  CHECK_FALSE(k.sameTop[0].item<bool>());
  CHECK(k.sameTop[1].item<bool>());
  CHECK(k.sameTop[2].item<bool>());
  // The base's NLL of the targets 1, 2, 0: -ln 1/4, -ln 0.1, -ln 1.
  CHECK(k.baseNll[0].item<double>() == Approx(std::log(4.0)));
  CHECK(k.baseNll[1].item<double>() == Approx(std::log(10.0)));
  CHECK(k.baseNll[2].item<double>() == Approx(0.0).margin(1e-15));
}

TEST_CASE("KL divergence: a row's percentiles of the per-token values") {
  std::vector<double> values;
  for (int i = 100; i >= 0; --i) values.push_back(i);  // 0..100 in any order
  KlSummary s = summarizeKl(values);
  CHECK(s.mean == Approx(50));
  CHECK(s.p99 == Approx(99));     // order statistic at 0.99 * 100
  CHECK(s.p999 == Approx(99.9));  // between 99 and 100 at 99.9
  CHECK(s.max == 100);
  KlSummary two = summarizeKl({1.0, 3.0});
  CHECK(two.p99 == Approx(2.98));  // 1 + 0.99 * 2
}

namespace {
EvalRequest tinyRequest(const RunInfo& run) {
  EvalRequest req;
  req.runs = {run.dir};
  req.lvalids = {16, 32};
  req.maxTokens = 600;
  req.device = "cpu";
  req.progress = false;
  req.threads = 1;
  return req;
}
}  // namespace

TEST_CASE("KL mode: a model against itself is 0 with every top token the same but an interpolation is not") {
  RunInfo run = trainTiny("kl-base", tinyConfig("alibi"), 3);
  EvalRequest req = tinyRequest(run);
  req.interps = {Interp::None, Interp::Linear};
  req.klBase = "none";
  req.modes = {"nonoverlap", "sliding"};
  req.positionBuckets = 4;
  std::vector<PositionLossRow> positions;
  auto rows = evaluateRuns(req, &positions);
  REQUIRE(rows.size() == 2 * 2 * 2);
  for (const EvalRow& r : rows) {
    CHECK(r.klBase == "none");
    if (r.interp == "none") {
      CHECK(r.klMean == 0);
      CHECK(r.klMax == 0);
      CHECK(r.sameTop == 1);
      CHECK(r.pplRatio == Approx(1).epsilon(1e-12));
    } else {
      // Linear a = 32 / 16 = 2 changes every slope: every token's KL > 0 at both lengths.
      CHECK(r.klMean > 0);
      CHECK(r.klP99 >= r.klMean);
      CHECK(r.klP999 >= r.klP99);
      CHECK(r.klMax >= r.klP999);
      CHECK(r.sameTop < 1);
      // The base is the none row of the same length and mode, scored on the same windows (the
      // ratio from the full log-softmax, the rows' ppl from the head's NLL: float32 rounding apart).
      for (const EvalRow& none : rows)
        if (none.interp == "none" && none.Lvalid == r.Lvalid && none.mode == r.mode)
          CHECK(r.pplRatio == Approx(r.ppl / none.ppl).epsilon(1e-5));
    }
  }
  // The per-position view carries the comparison: 0 everywhere for the model against itself.
  REQUIRE(positions.size() == rows.size() * 4);
  for (const PositionLossRow& p : positions) {
    CHECK(p.compared);
    CHECK(p.protocol == "xtrap");
    if (p.interp == "none") CHECK(p.meanKl == 0);
    if (p.interp == "none") CHECK(p.sameTop == 1);
  }
  // The per-document view (--log-samples) carries the protocol and the comparison.
  req.logSamples = true;
  req.modes = {"nonoverlap"};
  req.lvalids = {16};
  std::vector<std::string> lines;
  evaluateRuns(req, nullptr, &lines);
  REQUIRE(!lines.empty());
  for (const std::string& line : lines) {
    auto j = nlohmann::json::parse(line);
    CHECK(j["protocol"].get<std::string>().rfind("xtrap: windows of 16 every 16", 0) == 0);
    CHECK(j["kl_base"] == "none");
    if (j["interp"] == "none") CHECK(j["kl_mean"].get<double>() == 0);
    if (j["interp"] == "none") CHECK(j["same_top"].get<double>() == 1);
  }
  req.logSamples = false;
  // A base directory: the same run, as it is.
  req.klBase = run.dir.string();
  req.interps = {Interp::None};
  for (const EvalRow& r : evaluateRuns(req)) {
    CHECK(r.klBase == run.dir.filename().string());
    CHECK(r.klMean == 0);
    CHECK(r.sameTop == 1);
  }
  std::filesystem::remove_all(run.dir);
}

TEST_CASE("protocols through the model: the tokens each scores, counted by hand") {
  RunInfo run = trainTiny("protocols", tinyConfig("alibi"), 3);
  EvalRequest req = tinyRequest(run);
  req.lvalids = {16};
  auto scored = [&](const std::string& protocol, bool bos) {
    req.protocol = protocol;
    req.windowBos = bos;
    auto rows = evaluateRuns(req);
    REQUIRE(rows.size() == 1);
    CHECK(rows[0].protocol.rfind(protocol + ":", 0) == 0);  // the row says how it was scored
    return rows[0];
  };
  // 600 tokens; x' = <eos> x has 601. llama.cpp: floor(601 / 16) = 37 chunks of 16 - 1 - 8 = 7.
  EvalRow llama = scored("llama.cpp", false);
  CHECK(llama.mode == "llama.cpp");
  CHECK(llama.tokensScored == 37 * 7);
  CHECK(llama.textBytes == 0);  // not every token scored: no per-byte figures
  // strided, S = L_train / 2 = 8: every token but the stream's first (never a label).
  CHECK(scored("strided", false).tokensScored == 599);
  EvalRow yarn = scored("strided", true);
  CHECK(yarn.mode == "strided+bos");
  CHECK(yarn.tokensScored == 600);
  // lm-eval: every token once, per document, with the harness's counts of the pages.
  EvalRow lmEval = scored("lm-eval", false);
  CHECK(lmEval.tokensScored == 600);
  CHECK(lmEval.textBytes > 0);
  CHECK(lmEval.bitsPerByte == Approx(lmEval.nll * 600 / std::log(2.0) / double(lmEval.textBytes)));
  // xtrap's non-overlapping windows of 16 and lm-eval's differ only where a document starts.
  EvalRow xtrap = scored("xtrap", false);
  CHECK(xtrap.tokensScored == 600);
  req.maxTokens = 20;  // 21 < 2 * 16: llama.cpp refuses, as llama-perplexity does
  req.protocol = "llama.cpp";
  CHECK_THROWS_WITH(evaluateRuns(req), Catch::Contains("at least 2 * Lvalid = 32"));
  std::filesystem::remove_all(run.dir);
}

TEST_CASE("KL mode: a retrieval row carries it, over the answer tokens") {
  RunInfo run = trainTiny("kl-retrieval", tinyConfig("alibi"), 3);
  EvalRequest req = tinyRequest(run);
  req.task = "passkey";
  req.lvalids = {80};
  req.depths = {50};
  req.trials = 3;
  req.maxTokens = 0;
  req.interps = {Interp::None, Interp::Linear};
  req.scale = 4;
  req.klBase = "none";
  auto rows = evaluateRuns(req);
  REQUIRE(rows.size() == 2);
  CHECK(rows[0].klMean == 0);
  CHECK(rows[0].sameTop == 1);
  CHECK(rows[0].pplRatio == Approx(1).epsilon(1e-12));
  CHECK(rows[1].klMean > 0);
  // ppl / ppl(base) of the answers: exp(mean answer log-prob of the base - of the row's model).
  CHECK(rows[1].pplRatio == Approx(std::exp(rows[0].answerLogProb - rows[1].answerLogProb)).epsilon(1e-6));
  req.score = "generate";
  CHECK_THROWS_WITH(evaluateRuns(req), Catch::Contains("--score teacher"));
  std::filesystem::remove_all(run.dir);
}
