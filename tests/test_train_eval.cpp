// End to end on the shipped WikiText-2 with tiny models: training lowers the loss for every
// decoder position method, evaluation works beyond L, a checkpoint evaluates exactly like the
// in-memory model, and the sliding-window protocol matches its definitions.
#include <catch2/catch.hpp>
#include <cmath>
#include <fstream>

#include "data/wikitext.h"
#include "error_of.h"
#include "eval/evaluate_run.h"
#include "eval/perplexity.h"
#include "run/checkpoint.h"
#include "test_support.h"

using namespace xtrap;

namespace {
std::vector<double> loggedLosses(const RunInfo& run) {
  std::vector<double> losses;
  std::ifstream in(run.dir / "train.jsonl");
  std::string line;
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line);
    if (j.contains("loss")) losses.push_back(j["loss"].get<double>());
  }
  return losses;
}
double meanOf(const std::vector<double>& v, size_t from, size_t n) {
  double s = 0;
  for (size_t i = from; i < from + n; ++i) s += v[i];
  return s / double(n);
}
EvalRequest quickEval(const RunInfo& run, std::vector<int64_t> lvalids) {
  EvalRequest req;
  req.runs = {run.dir};
  req.lvalids = std::move(lvalids);
  req.maxTokens = 3000;
  req.progress = false;
  req.threads = 1;
  req.device = "cpu";  // where trainTiny trained and its numbers were computed
  return req;
}
}  // namespace

TEST_CASE("every decoder position method trains (loss falls) and evaluates at Lvalid > L") {
  for (std::string pos : {"none", "sinusoidal", "learned", "rotary", "t5", "alibi", "kerple-log", "fire"}) {
    INFO("pos " << pos);
    RunInfo run = test::trainTiny("dec-" + pos, test::tinyConfig(pos), 40);
    auto losses = loggedLosses(run);
    REQUIRE(losses.size() == 40);
    CHECK(meanOf(losses, 35, 5) < meanOf(losses, 0, 5) - 0.5);
    auto rows = evaluateRuns(quickEval(run, {16, 64}));
    REQUIRE(rows.size() == 2);
    for (const auto& r : rows) {
      CHECK(r.tokensScored == 3000);  // every token of the 3000-token stream
      CHECK(std::isfinite(r.ppl));
      CHECK(r.ppl < 33278);  // better than uniform over the vocabulary
    }
  }
}

TEST_CASE("evaluating the saved checkpoint equals the in-memory model's final validation") {
  auto cfg = test::tinyConfig("alibi");
  RunInfo run = test::trainTiny("ckpt", cfg, 20);
  // The trainer's final validation: in-memory model, first evalTokens (4096) tokens, Lvalid = L.
  auto req = quickEval(run, {cfg.contextLength});
  req.maxTokens = 4096;
  auto rows = evaluateRuns(req);
  CHECK(rows[0].nll == Approx(run.extra["final_val_loss"].get<double>()).epsilon(1e-9));
}

TEST_CASE("sliding-window evaluation protocol") {
  RunInfo run = test::trainTiny("sliding", test::tinyConfig("alibi"), 15);
  SECTION("stride = Lvalid equals non-overlapping exactly") {
    auto req = quickEval(run, {16, 40});
    req.modes = {"nonoverlap", "sliding"};
    req.stride = 1000;  // clamped to Lvalid
    auto rows = evaluateRuns(req);
    REQUIRE(rows.size() == 4);
    CHECK(rows[0].nll == rows[1].nll);
    CHECK(rows[2].nll == rows[3].nll);
    CHECK(rows[1].stride == 16);
  }
  SECTION("stride 1 equals scoring each token with its full left context, one by one") {
    Corpus corpus = loadWikiText(XTRAP_DEFAULT_DATA_DIR);
    std::vector<int32_t> stream(corpus.valid.begin() + 100, corpus.valid.begin() + 140);
    Transformer model = loadTrainedModel(run);
    ScoreOptions opt;
    opt.Lvalid = 8;
    opt.stride = 1;
    opt.eos = corpus.vocab.eos();
    auto totals = scoreDecoder(model, stream, opt);
    double expected = 0;
    torch::NoGradGuard g;
    std::vector<int64_t> prefixed{opt.eos};  // <eos> x: the first token is predicted from <eos>
    prefixed.insert(prefixed.end(), stream.begin(), stream.end());
    for (size_t t = 1; t < prefixed.size(); ++t) {
      size_t from = t >= 8 ? t - 8 : 0;
      auto ctx =
          torch::tensor(std::vector<int64_t>(prefixed.begin() + long(from), prefixed.begin() + long(t))).unsqueeze(0);
      auto f = model->features(ctx);
      auto last = f[0][f.size(1) - 1].unsqueeze(0);
      expected += model->tokenNll(last, torch::tensor({prefixed[t]})).item<double>();
    }
    CHECK(totals.tokens == 40);
    CHECK(totals.nll == Approx(expected).epsilon(1e-5));
  }
  SECTION("per-position buckets add up to the totals") {
    auto req = quickEval(run, {32});
    req.positionBuckets = 4;
    std::vector<PositionLossRow> positions;
    auto rows = evaluateRuns(req, &positions);
    REQUIRE(positions.size() == 4);
    double nll = 0;
    int64_t tokens = 0;
    for (const auto& p : positions) nll += p.meanNll * double(p.tokens), tokens += p.tokens;
    CHECK(tokens == rows[0].tokensScored);
    CHECK(nll / double(tokens) == Approx(rows[0].nll).epsilon(1e-9));
  }
}

TEST_CASE("interpolation changes the slopes used and is recorded in the rows") {
  RunInfo run = test::trainTiny("interp", test::tinyConfig("alibi"), 10);
  auto req = quickEval(run, {16, 64});
  req.interps = {Interp::None, Interp::Linear, Interp::Ntk, Interp::DynamicNtk};
  auto rows = evaluateRuns(req);
  REQUIRE(rows.size() == 8);
  // H = 4 slopes 1/4 1/16 1/64 1/256; linear and ntk use one a for the whole sweep: the longest
  // Lvalid 64 over L = 16 = 4, at Lvalid 16 too.
  CHECK(rows[0].slopes == "0.25 0.0625 0.015625 0.0039062");
  for (int r : {2, 3}) {
    CHECK(rows[r].interp == "linear");
    CHECK(rows[r].scale == 4.0);
    CHECK(rows[r].slopes == "0.0625 0.015625 0.0039062 0.00097656");
  }
  // ntk, a = 4: 2^(-8h/4) / 4^((h-1)/3)
  CHECK(rows[4].scale == 4.0);
  CHECK(rows[4].slopes == "0.25 0.039373 0.0062008 0.00097656");
  CHECK(rows[4].nll != rows[0].nll);
  // dynamic-ntk at Lvalid = L is no interpolation: same perplexity as none
  CHECK(rows[6].scale == 1.0);
  CHECK(rows[6].nll == rows[0].nll);
  CHECK(rows[7].scale == 4.0);
}

TEST_CASE("dynamic NTK takes a from each window's own length, the last partial window too") {
  RunInfo run = test::trainTiny("dynamic-ntk", test::tinyConfig("alibi"), 10);
  // 3000 tokens at Lvalid 64 (L = 16): 46 full windows (2944 tokens, a = 4) and a last window of
  // 56 tokens (a = 56 / 16 = 3.5). Windows are scored independently, so the dynamic sum must be
  // NTK(a = 4) on the first 2944 tokens plus NTK(a = 3.5) on the last window alone.
  auto sumNll = [&](Interp interp, double scale, int64_t tokens) {
    auto req = quickEval(run, {64});
    req.interps = {interp};
    req.scale = scale;
    req.maxTokens = tokens;
    auto row = evaluateRuns(req).at(0);
    REQUIRE(row.tokensScored == tokens);
    return row.nll * double(tokens);
  };
  double dynamic = sumNll(Interp::DynamicNtk, 0, 3000);
  double lastWindowAt35 = sumNll(Interp::Ntk, 3.5, 3000) - sumNll(Interp::Ntk, 3.5, 2944);
  double expected = sumNll(Interp::Ntk, 4.0, 2944) + lastWindowAt35;
  CHECK(dynamic == Approx(expected).epsilon(1e-9));
  // ... and not the a of the full windows everywhere
  CHECK(std::abs(dynamic - sumNll(Interp::Ntk, 4.0, 3000)) > 1e-6);
}

// Micro-batches, --accumulate N: the step's sequences in N micro-batches give the whole step to float rounding,
// each micro-batch's loss weighted by its share of the step's scored tokens (an encoder's masked
// counts differ from micro-batch to micro-batch: weights of 1 / N would log another loss from the
// first step on). Dropout 0: micro-batches draw their masks in another order.
TEST_CASE("micro-batches (--accumulate) train as the whole step does, with and without host reads") {
  auto accumulate = [](int64_t n) { return [n](TrainConfig& t) { t.accumulate = n; }; };
  for (const std::string arch : {"decoder", "encoder"}) {
    INFO(arch);
    ModelConfig c = test::tinyConfig("alibi", arch);
    RunInfo whole = test::trainTiny("acc-whole-" + arch, c, 8, 1, accumulate(1));
    RunInfo parts = test::trainTiny("acc-parts-" + arch, c, 8, 1, accumulate(4));  // 4 micro-batches of 2
    CHECK(test::worstRelative(test::loggedLosses(whole), test::loggedLosses(parts)) <= 1e-5);
    CHECK(parts.train.accumulate == 4);  // recorded in run.json
  }
  // The step without host reads (a decoder's): the same.
  auto uncaptured = [](TrainRequest& r) { r.cudaGraph = "uncaptured"; };
  RunInfo whole = test::trainTiny("acc-dev-whole", test::tinyConfig("alibi"), 8, 1, accumulate(1), uncaptured);
  RunInfo parts = test::trainTiny("acc-dev-parts", test::tinyConfig("alibi"), 8, 1, accumulate(2), uncaptured);
  CHECK(parts.extra["train_step"] == "uncaptured");
  CHECK(test::worstRelative(test::loggedLosses(whole), test::loggedLosses(parts)) <= 1e-5);
  // A batch that does not split into the micro-batches is a one-line error.
  CHECK(test::errorOf([&] { test::trainTiny("acc-uneven", test::tinyConfig("alibi"), 1, 1, accumulate(3)); }) ==
        "the batch of 8 sequences does not split evenly into 3 micro-batches (--accumulate)");
}
