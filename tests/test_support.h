#pragma once
// Small models and runs shared by the tensor tests.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "data/wikitext.h"
#include "eval/encoder_score.h"
#include "eval/perplexity.h"
#include "model/model_config.h"
#include "model/transformer.h"
#include "train/trainer.h"
#include "util/execution_context.h"

namespace xtrap::test {

using ModelSetup = std::function<void(ModelConfig&)>;
// Changes to the tiny run's TrainConfig (precision, device, learning rate...).
using TrainSetup = std::function<void(TrainConfig&)>;
// Changes to the rest of the request (--cuda-graph, injected NaN steps...).
using RequestSetup = std::function<void(TrainRequest&)>;

inline ModelConfig tinyConfig(const std::string& pos, const std::string& arch = "decoder", int64_t heads = 4) {
  ModelConfig c;
  c.arch = arch;
  c.pos = pos;
  c.vocabSize = 50;
  c.layers = 2;
  c.dModel = 16;
  c.heads = heads;
  c.ffn = 32;
  c.dropout = 0.0;
  c.contextLength = 16;
  c.maxPositions = 64;
  c.alibiInit = "standard";
  return c;
}

// A model with the same weights as `source`, placed on `ctx` (device and precision), in the
// same training mode.
inline Transformer copyOnto(Transformer& source, const ExecutionContext& ctx) {
  Transformer copy(source->config);
  {
    torch::NoGradGuard g;
    auto from = source->named_parameters();
    for (auto& p : copy->named_parameters()) p.value().copy_(from[p.key()]);
  }
  copy->place(ctx);
  copy->train(source->is_training());
  return copy;
}

inline double maxAbsDiff(const torch::Tensor& a, const torch::Tensor& b) {
  return (a.to(torch::kFloat64) - b.to(torch::kFloat64)).abs().max().item<double>();
}

// Trains a tiny model on the shipped WikiText-2 into a fresh directory and returns the run. On the
// CPU in float32 unless `setup` says otherwise (the CPU tests stay CPU tests on a GPU machine).
inline RunInfo trainTiny(const std::string& name, ModelConfig model, int64_t steps, int64_t threads = 1,
                         const TrainSetup& setup = {}, const RequestSetup& requestSetup = {}) {
  TrainRequest req;
  req.model = model;
  req.train.dataDir = XTRAP_DEFAULT_DATA_DIR;
  req.train.steps = steps;
  req.train.batchSequences = 8;
  req.train.lr = 3e-3;
  req.train.warmupSteps = 5;
  req.train.evalEvery = 0;
  req.train.evalTokens = 4096;
  req.train.threads = threads;
  req.train.logEvery = 1;
  req.train.device = "cpu";
  req.train.dtype = "float32";
  if (setup) setup(req.train);
  req.progress = false;
  if (requestSetup) requestSetup(req);
  req.runDir = std::filesystem::temp_directory_path() / ("xtrap-test-run-" + name);
  std::filesystem::remove_all(req.runDir);
  return trainRun(req);
}

// The training losses a run logged in train.jsonl, in step order.
inline std::vector<double> loggedLosses(const RunInfo& run) {
  std::vector<double> losses;
  std::ifstream in(run.dir / "train.jsonl");
  for (std::string line; std::getline(in, line);) {
    auto j = nlohmann::json::parse(line);
    if (j.contains("loss")) losses.push_back(j["loss"].get<double>());
  }
  return losses;
}

// Largest |a_i - b_i| / |a_i| of two runs' logged losses (loggedLosses); infinite when they logged
// different numbers of steps, or none.
inline double worstRelative(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size() || a.empty()) return INFINITY;
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(a[i] - b[i]) / std::abs(a[i]));
  return worst;
}

// Every position method with every architecture it applies to.
struct Method {
  std::string pos, arch;
};
inline std::vector<Method> everyMethod() {
  std::vector<Method> methods;
  for (std::string pos : {"none", "sinusoidal", "learned", "rotary", "t5", "alibi", "kerple-log", "fire"})
    methods.push_back({pos, "decoder"});
  for (std::string pos : {"none", "sinusoidal", "learned", "rotary", "t5", "alibi", "alibi-offset", "alibi-onesided",
                          "alibi-learned", "bialibi", "kerple-log", "fire"})
    methods.push_back({pos, "encoder"});
  return methods;
}

// bialibi's first-token bias starts at 0, where a test cannot see it: give each head its own
// value, -1 to 1 (nothing for the other methods).
inline void spreadFirstTokenBias(Transformer& model) {
  if (auto* lb = model->linearBias(); lb && lb->firstTokenBias().defined()) {
    torch::NoGradGuard g;
    lb->firstTokenBias().copy_(torch::linspace(-1, 1, model->config.heads));
  }
}

// Whether a label can reach an encoder's prediction through its forward (issue 59). Row 0 of a
// batch of 3 has every selected position (about 15%, the first and the last included) replaced by
// <mask> (the last id); rows 1 and 2 carry row 0's words unmasked (row 2 reversed), so every
// target is in the batch, where only a read of the wrong row or key would take it to row 0's
// masked positions. `masked`: the largest change of row 0's logits at its selected positions when
// every target changes to another word (rows 1 and 2 with them), relative to the largest logit; 0
// on a path that leaks nothing. `visible`: the same change when row 0 itself carries the targets
// unmasked, what a leak would show at worst (so a `masked` of 0 means something).
struct LabelLeak {
  double masked, visible;
};
inline LabelLeak labelLeak(Transformer& model, int64_t T, const ForwardOptions& opt, uint64_t seed) {
  torch::NoGradGuard noGrad;
  torch::manual_seed(seed);
  int64_t V = model->config.vocabSize, maskId = V - 1;
  auto words = torch::randint(0, V - 1, {T}, torch::kLong);  // (T) never <mask>
  auto selected = torch::rand({T}) < 0.15;                   // (T) bool
  selected[0] = true;
  selected[T - 1] = true;
  auto otherWords = torch::where(selected, (words + torch::randint(1, V - 1, {T}, torch::kLong)) % (V - 1), words);
  auto masked = words.masked_fill(selected, maskId);
  auto logitsAtSelected = [&](const torch::Tensor& row0, const torch::Tensor& targets) {
    auto tokens = torch::stack({row0, targets, targets.flip(0)});  // (3, T)
    auto f = model->features(tokens, opt);                         // (3, T, C)
    auto rows = f[0].index({selected.to(f.device())});             // (N, C)
    return toHost(model->logits(rows)).to(torch::kFloat64);        // (N, V)
  };
  auto base = logitsAtSelected(masked, words);
  double scale = base.abs().max().item<double>();
  auto change = [&](const torch::Tensor& a, const torch::Tensor& b) {
    return (a - b).abs().max().item<double>() / scale;
  };
  return {change(logitsAtSelected(masked, otherWords), base),
          change(logitsAtSelected(otherWords, otherWords), logitsAtSelected(words, words))};
}

// The shipped WikiText-2, loaded once.
inline const Corpus& shippedCorpus() {
  static const Corpus c = loadWikiText(XTRAP_DEFAULT_DATA_DIR);
  return c;
}

// Mean NLL of the first `n` validation tokens, windows of `Lvalid` (0 = L), attention query
// blocks of `queryBlock` (0 = planned), by a decoder or an encoder.
inline double meanValidNll(Transformer& model, size_t n, int64_t Lvalid = 0, int64_t queryBlock = 0) {
  const Corpus& corpus = shippedCorpus();
  std::vector<int32_t> stream(corpus.valid.begin(), corpus.valid.begin() + long(n));
  int64_t length = Lvalid > 0 ? Lvalid : model->config.contextLength;
  if (model->config.causal()) {
    ScoreOptions opt;
    opt.Lvalid = length;
    opt.queryBlock = queryBlock;
    opt.eos = corpus.vocab.eos();
    return scoreDecoder(model, stream, opt).meanNll();
  }
  EncoderScoreOptions opt;
  opt.Lvalid = length;
  opt.queryBlock = queryBlock;
  opt.mlm = model->config.mlmTokens(corpus.vocab);
  return scoreEncoder(model, stream, opt).meanNll();
}

}  // namespace xtrap::test
