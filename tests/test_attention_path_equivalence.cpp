// Every attention path this build has, forced through ForwardOptions::path, computes what the
// reference path computes: features and the gradient of every parameter (learned slopes,
// first-token bias and T5's table included), for every position method of decoders and encoders,
// on a window long enough that the causal-skip path really splits into blocks. And the reference
// path itself against a hand loop: for ALiBi-family heads its attention is
// softmax_j(q_i . k_j / sqrt(D) + LinearBiasSpec::bias(h, i, j)).
#include <catch2/catch.hpp>
#include <cmath>
#include <map>

#include "model/attention_plan.h"
#include "model/linear_bias_spec.h"
#include "model/transformer.h"
#include "test_support.h"
#include "util/torch_compat.h"

using namespace xtrap;

namespace {

// A forward and backward through one path: the features and every parameter's gradient by name.
struct Pass {
  torch::Tensor features;                      // (B, T, C)
  std::map<std::string, torch::Tensor> grads;  // parameters with a gradient
};

Pass runPath(Transformer& model, const torch::Tensor& tokens, const torch::Tensor& targets,
             const torch::Tensor& weights, ForwardOptions opt) {
  model->zero_grad();
  for (auto& p : model->parameters()) p.mutable_grad() = torch::Tensor();
  auto f = model->features(tokens, opt);  // (B, T, C)
  int64_t C = f.size(-1);
  // Both the head (through the NLL) and a random direction of the features: every parameter gets
  // a gradient that depends on the attention.
  auto loss = model->tokenNll(f.reshape({-1, C}), targets).mean() + (f * weights).sum() / double(f.numel());
  loss.backward();
  Pass pass{f.detach().cpu(), {}};
  for (const auto& p : model->named_parameters())
    if (auto g = p.value().grad(); g.defined())
      pass.grads[p.key()] = (g.is_sparse() ? g.to_dense() : g).detach().cpu().clone();
  return pass;
}

double maxAbs(const torch::Tensor& t) { return t.abs().max().to(torch::kFloat64).item<double>(); }

// max |a - b| <= tol * max |reference|: float32 sums in another order differ by ~1e-6 relative.
void checkClose(const torch::Tensor& reference, const torch::Tensor& got, double tol, const std::string& what) {
  double diff = test::maxAbsDiff(reference, got), scale = maxAbs(reference);
  INFO(what << ": max |difference| " << diff << ", max |reference| " << scale);
  CHECK(diff <= tol * scale + 1e-7);
}

}  // namespace

TEST_CASE("every attention path equals the reference path, forward and every gradient", "[attention-paths]") {
  // T = 260: the causal-skip path splits into 8 blocks of 33 rows (the last 29), and the block
  // path's blocks do not divide T evenly.
  constexpr int64_t T = 260;
  REQUIRE(causalSkipBlock(T) > 0);
  REQUIRE(causalSkipBlock(T) < T);
  for (const auto& m : test::everyMethod()) {
    INFO(m.arch << " " << m.pos);
    auto cfg = test::tinyConfig(m.pos, m.arch);
    cfg.maxPositions = 512;  // learned positions: a table longer than the window
    Transformer model(cfg);
    model->eval();  // no dropout; gradients still flow
    if (auto* lb = model->linearBias(); lb && lb->firstTokenBias().defined()) {
      torch::NoGradGuard g;  // first-token bias starts at 0: give each head its own value
      lb->firstTokenBias().copy_(torch::linspace(-1, 1, cfg.heads));
    }
    torch::manual_seed(7);
    auto tokens = torch::randint(0, cfg.vocabSize, {2, T}, torch::kLong);
    auto targets = torch::randint(0, cfg.vocabSize, {2 * T}, torch::kLong);
    auto weights = torch::randn({2, T, cfg.dModel});

    ForwardOptions refOpt;
    refOpt.path = AttentionPath::Reference;
    Pass ref = runPath(model, tokens, targets, weights, refOpt);
    // Every trainable parameter has a gradient, the position method's own ones included.
    CHECK(ref.grads.size() == model->parameters().size());
    if (m.pos == "alibi-learned" || m.pos == "bialibi") {
      CHECK(ref.grads.count("linear_bias.slope_past_logit") == 1);
      CHECK(ref.grads.count("linear_bias.slope_future_logit") == 1);
    }
    if (m.pos == "bialibi") CHECK(ref.grads.count("linear_bias.first_token_bias") == 1);

    std::vector<std::pair<std::string, ForwardOptions>> paths;
    if (cfg.causal()) {
      ForwardOptions o;
      o.path = AttentionPath::CausalSkip;
      paths.push_back({"causal-skip", o});
    }
    for (int64_t block : {3, 64, 259}) {
      ForwardOptions o;
      o.path = AttentionPath::Block;
      o.queryBlock = block;
      paths.push_back({"block " + std::to_string(block), o});
    }
    for (int64_t rows : {0, 7}) {  // the planned blocks (one here), and blocks of 7 rows
      ForwardOptions o;
      o.path = AttentionPath::Recompute;
      o.queryBlock = rows;
      paths.push_back({"recompute " + std::to_string(rows), o});
    }
#ifdef XTRAP_HAS_SDPA
    {
      ForwardOptions o;
      o.path = AttentionPath::Sdpa;
      paths.push_back({"sdpa", o});
    }
#endif
    for (const auto& [name, opt] : paths) {
      INFO("path " << name);
      Pass got = runPath(model, tokens, targets, weights, opt);
      checkClose(ref.features, got.features, 1e-4, "features");
      REQUIRE(got.grads.size() == ref.grads.size());
      for (const auto& [param, grad] : ref.grads) {
        REQUIRE(got.grads.count(param) == 1);
        checkClose(grad, got.grads.at(param), 1e-4, "gradient of " + param);
      }
    }
  }
}

namespace {
// Keeps layer 0's probabilities, block by block, as one (B, H, T, T) tensor.
struct Layer0Probabilities : AttentionObserver {
  explicit Layer0Probabilities(int64_t T) : T(T) {}
  int64_t T;
  torch::Tensor probs;
  void onProbabilities(int64_t layer, int64_t q0, const torch::Tensor& p) override {
    if (layer != 0) return;
    auto host = p.detach().to(torch::kCPU, torch::kFloat64);  // (B, H, Tq, Tk)
    if (!probs.defined()) probs = torch::zeros({host.size(0), host.size(1), T, T}, host.options());
    // Causal blocks see keys [0, Tk) only; the later keys have probability 0.
    probs.narrow(2, q0, host.size(2)).narrow(3, 0, host.size(3)).copy_(host);
  }
};
}  // namespace

TEST_CASE("the reference path's ALiBi attention is softmax(q.k / sqrt(D) + spec bias), by hand", "[attention-paths]") {
  constexpr int64_t T = 12;
  for (test::Method m : {test::Method{"alibi", "decoder"}, test::Method{"alibi-offset", "encoder"},
                         test::Method{"alibi-onesided", "encoder"}, test::Method{"bialibi", "encoder"}}) {
    INFO(m.arch << " " << m.pos);
    auto cfg = test::tinyConfig(m.pos, m.arch);
    Transformer model(cfg);
    model->eval();
    LinearBias* lb = model->linearBias();
    REQUIRE(lb != nullptr);
    std::vector<double> ftb(size_t(cfg.heads), 0.0);
    if (lb->firstTokenBias().defined()) {
      torch::NoGradGuard g;
      lb->firstTokenBias().copy_(torch::linspace(-1, 1, cfg.heads));
      for (int64_t h = 0; h < cfg.heads; ++h) ftb[size_t(h)] = -1.0 + 2.0 * double(h) / double(cfg.heads - 1);
    }
    LinearBiasSpec spec = makeLinearBiasSpec(parsePositionMethod(m.pos), cfg.heads, cfg.causal());
    torch::manual_seed(11);
    auto tokens = torch::randint(0, cfg.vocabSize, {1, T}, torch::kLong);

    // Layer 0's queries and keys from its own weights: scaled token embeddings, LayerNorm, qkv.
    torch::NoGradGuard g;
    int64_t C = cfg.dModel, H = cfg.heads, D = C / H;
    auto& block0 = *model->blocks[0]->as<TransformerBlock>();
    auto x = model->tokenEmbedding(tokens) * std::sqrt(double(C));      // (1, T, C)
    auto qkv = block0.attn->qkv(block0.ln1(x)).to(torch::kFloat64)[0];  // (T, 3C)
    auto q = qkv.narrow(1, 0, C), k = qkv.narrow(1, C, C);              // (T, C): head h is columns h*D..
    for (AttentionPath path : {AttentionPath::Reference, AttentionPath::Block}) {
      INFO("path " << attentionPathName(path));
      Layer0Probabilities seen(T);
      ForwardOptions opt;
      opt.path = path;
      opt.queryBlock = path == AttentionPath::Block ? 5 : 0;
      opt.observer = &seen;
      model->features(tokens, opt);
      REQUIRE(seen.probs.defined());
      auto probs = seen.probs[0];  // (H, T, T)
      double worst = 0;
      for (int64_t h = 0; h < H; ++h)
        for (int64_t i = 0; i < T; ++i) {
          std::vector<double> logits(T);
          double top = -INFINITY;
          for (int64_t j = 0; j < T; ++j) {
            double dot = 0;
            for (int64_t d = 0; d < D; ++d) dot += q[i][h * D + d].item<double>() * k[j][h * D + d].item<double>();
            double b = spec.bias(h, i, j, ftb[size_t(h)]);
            if (cfg.causal() && j > i) b = -INFINITY;
            logits[size_t(j)] = dot / std::sqrt(double(D)) + b;
            top = std::max(top, logits[size_t(j)]);
          }
          double z = 0;
          for (double l : logits) z += std::exp(l - top);
          for (int64_t j = 0; j < T; ++j)
            worst = std::max(worst, std::abs(std::exp(logits[size_t(j)] - top) / z - probs[h][i][j].item<double>()));
        }
      INFO("largest probability difference " << worst);
      CHECK(worst <= 1e-5);
    }
  }
}
