// Every attention path this build has, forced through ForwardOptions::path, computes what the
// reference path computes: features and the gradient of every parameter (learned slopes,
// first-token bias and T5's table included), for every position method of decoders and encoders,
// on a window long enough that the causal-skip path really splits into blocks; the recompute
// path also on sliding-window layers, and asking its provider for one query block at a time. And
// the reference path itself against a hand loop: for ALiBi-family heads its attention is
// softmax_j(q_i . k_j / sqrt(D) + LinearBiasSpec::bias(h, i, j)).
#include <catch2/catch.hpp>
#include <cmath>
#include <functional>
#include <map>

#include "model/attention_plan.h"
#include "model/linear_bias_spec.h"
#include "model/position/fire_bias.h"
#include "model/position/kerple_bias.h"
#include "model/position/linear_bias.h"
#include "model/position/t5_bias.h"
#include "model/recomputed_attention.h"
#include "model/transformer.h"
#include "test_support.h"
#include "util/execution_context.h"
#include "util/torch_compat.h"

using namespace xtrap;

namespace {

// A forward and backward through one path: the features and every parameter's gradient by name.
struct Pass {
  torch::Tensor features;                      // (B, T, C)
  std::map<std::string, torch::Tensor> grads;  // parameters with a gradient
};

// Two windows of T random tokens, their targets and a random direction of the features.
struct Inputs {
  Inputs(const ModelConfig& cfg, int64_t T, uint64_t seed) {
    torch::manual_seed(seed);
    tokens = torch::randint(0, cfg.vocabSize, {2, T}, torch::kLong);
    targets = torch::randint(0, cfg.vocabSize, {2 * T}, torch::kLong);
    weights = torch::randn({2, T, cfg.dModel});
  }
  torch::Tensor tokens, targets, weights;  // (2, T), (2 T), (2, T, C)
};

Pass runPath(Transformer& model, const Inputs& in, ForwardOptions opt) {
  model->zero_grad();
  for (auto& p : model->parameters()) p.mutable_grad() = torch::Tensor();
  auto f = model->features(in.tokens, opt);  // (B, T, C)
  int64_t C = f.size(-1);
  // Both the head (through the NLL) and a random direction of the features: every parameter gets
  // a gradient that depends on the attention.
  auto loss = model->tokenNll(f.reshape({-1, C}), in.targets).mean() + (f * in.weights).sum() / double(f.numel());
  loss.backward();
  Pass pass{f.detach().cpu(), {}};
  for (const auto& p : model->named_parameters())
    if (auto g = p.value().grad(); g.defined())
      pass.grads[p.key()] = (g.is_sparse() ? g.to_dense() : g).detach().cpu().clone();
  return pass;
}

double maxAbs(const torch::Tensor& t) { return t.abs().max().to(torch::kFloat64).item<double>(); }

// max |a - b| <= tol * max |reference| + floor: float32 sums in another order differ by ~1e-6
// relative.
void checkClose(const torch::Tensor& reference, const torch::Tensor& got, double tol, const std::string& what,
                double floor = 1e-7) {
  double diff = test::maxAbsDiff(reference, got), scale = maxAbs(reference);
  INFO(what << ": max |difference| " << diff << ", max |reference| " << scale);
  CHECK(diff <= tol * scale + floor);
}

// The same features and the same gradient of every parameter as the reference pass.
void checkSamePass(const Pass& ref, const Pass& got) {
  checkClose(ref.features, got.features, 1e-4, "features");
  REQUIRE(got.grads.size() == ref.grads.size());
  for (const auto& [param, grad] : ref.grads) {
    REQUIRE(got.grads.count(param) == 1);
    checkClose(grad, got.grads.at(param), 1e-4, "gradient of " + param);
  }
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
    Inputs in(cfg, T, 7);

    ForwardOptions refOpt;
    refOpt.path = AttentionPath::Reference;
    Pass ref = runPath(model, in, refOpt);
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
      checkSamePass(ref, runPath(model, in, opt));
    }
  }
}

TEST_CASE("sliding-window layers: the recompute path equals the reference path, forward and every gradient",
          "[attention-paths]") {
  // The recompute path takes the window from its blocks' bias (attentionBiasBlock), with and
  // without a bias provider, on some layers or all of them; blocks of 7 rows and the planned ones.
  constexpr int64_t T = 60;
  struct Case {
    std::string pos;
    int64_t window;
    std::vector<int64_t> layers;  // empty: every layer
  };
  for (const auto& c : {Case{"alibi", 9, {1}}, Case{"rotary", 7, {}}, Case{"t5", 9, {0}}, Case{"kerple-log", 11, {}},
                        Case{"none", 9, {1}}}) {
    INFO(c.pos << ", window " << c.window);
    auto cfg = test::tinyConfig(c.pos);
    cfg.attentionWindow = c.window;
    cfg.windowedLayers = c.layers;
    Transformer model(cfg);
    model->eval();
    Inputs in(cfg, T, 5);
    ForwardOptions refOpt;
    refOpt.path = AttentionPath::Reference;
    Pass ref = runPath(model, in, refOpt);
    for (int64_t rows : {0, 7}) {
      INFO("recompute, blocks of " << rows << " rows (0: planned)");
      ForwardOptions o;
      o.path = AttentionPath::Recompute;
      o.queryBlock = rows;
      checkSamePass(ref, runPath(model, in, o));
    }
  }
}

namespace {
// A provider's bias, recording the most query rows any call asked for.
struct RecordingBias : AttentionBias {
  explicit RecordingBias(std::shared_ptr<AttentionBias> provider) : inner(register_module("inner", provider)) {}
  torch::Tensor block(int64_t q0, int64_t q1, int64_t k0, int64_t k1) override {
    mostRows = std::max(mostRows, q1 - q0);
    return inner->block(q0, q1, k0, k1);
  }
  bool trainable() const override { return inner->trainable(); }
  bool blocksFuture() const override { return inner->blocksFuture(); }
  std::shared_ptr<AttentionBias> inner;
  int64_t mostRows = 0;
};
}  // namespace

TEST_CASE("the recompute path asks the provider for one query block at a time and trains its parameters",
          "[attention-paths]") {
  // One attention layer on the recompute path with blocks of 7 rows against the reference path
  // with the full (H, T, T) bias: the same output and the same gradients of the input, the layer's
  // weights and every bias parameter (learned slopes, first-token bias, T5's table, KERPLE's r1 and
  // r2, FIRE's MLP), while the provider is never asked for more than 7 query rows.
  constexpr int64_t B = 2, T = 50, rows = 7;
  auto cfg = test::tinyConfig("alibi");
  const int64_t H = cfg.heads;
  LinearBiasSpec learned = makeLinearBiasSpec(PositionMethod::AlibiLearned, H, false);
  LinearBiasSpec firstToken = makeLinearBiasSpec(PositionMethod::BiAlibi, H, false);
  struct Case {
    std::string name;
    std::shared_ptr<AttentionBias> provider;
    bool causal;
  };
  std::vector<Case> cases = {
      {"alibi", std::make_shared<LinearBias>(makeLinearBiasSpec(PositionMethod::Alibi, H, true), false), true},
      {"alibi-learned", std::make_shared<LinearBias>(learned, true), false},
      {"bialibi", std::make_shared<LinearBias>(firstToken, false), false},
      {"t5 decoder", std::make_shared<T5Bias>(H, 32, 128, false), true},
      {"t5 encoder", std::make_shared<T5Bias>(H, 32, 128, true), false},
      {"kerple-log", std::make_shared<KerpleLogBias>(H), true},
      {"fire", std::make_shared<FireBias>(H, 16.0), true},
  };
  for (auto& c : cases) {
    INFO(c.name);
    {
      torch::NoGradGuard g;  // parameters away from their initial values: every head its own gradient
      for (auto& p : c.provider->parameters()) p.add_(torch::rand_like(p) * 0.2);
    }
    auto recording = std::make_shared<RecordingBias>(c.provider);
    Attention layer(cfg, 0);
    layer->eval();
    torch::manual_seed(9);
    auto x = torch::randn({B, T, cfg.dModel});
    auto w = torch::randn({B, T, cfg.dModel});
    auto run = [&](AttentionPath path) {
      AttentionContext ctx;
      ctx.path = path;
      ctx.causal = c.causal;
      ctx.bias = recording.get();
      if (path == AttentionPath::Reference)
        ctx.fullBias = attentionBiasBlock(recording.get(), c.causal, 0, T, 0, T, torch::TensorOptions());
      else
        ctx.queryBlock = rows;
      auto xi = x.clone().requires_grad_();
      layer->zero_grad();
      recording->zero_grad();
      auto y = layer->forward(xi, ctx);  // (B, T, C)
      (y * w).sum().backward();
      std::vector<torch::Tensor> got{y.detach(), xi.grad()};
      for (auto& p : layer->parameters()) got.push_back(p.grad().clone());
      for (auto& p : recording->parameters()) got.push_back(p.grad().defined() ? p.grad().clone() : torch::Tensor());
      return got;
    };
    recording->mostRows = 0;
    auto blocked = run(AttentionPath::Recompute);
    CHECK(recording->mostRows == rows);
    auto reference = run(AttentionPath::Reference);
    REQUIRE(blocked.size() == reference.size());
    for (size_t i = 0; i < reference.size(); ++i) {
      INFO("tensor " << i << " (0 output, 1 input gradient, then the layer's and the provider's parameters)");
      REQUIRE(reference[i].defined());
      REQUIRE(blocked[i].defined());
      // Floor 1e-6: FIRE's output bias adds one constant to every logit of a head, which softmax
      // ignores; its gradient is zero but for float32 rounding (a few 1e-7 either way).
      checkClose(reference[i], blocked[i], 1e-4, "recompute against reference", 1e-6);
    }
  }
  // Grouped key/value heads and a soft-cap are the reference, causal-skip and block paths' only
  // (attention_plan.h): a forced recompute path refuses them.
  auto grouped = test::tinyConfig("rotary");
  grouped.kvHeads = 2;
  Attention groupedLayer(grouped, 0);
  AttentionContext forced;
  forced.path = AttentionPath::Recompute;
  CHECK_THROWS_WITH(groupedLayer->forward(torch::randn({1, 8, grouped.dModel}), forced),
                    Catch::Contains("no grouped key/value heads"));
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

namespace {
// A provider's bias shifted by a constant: softmax ignores the shift, but bfloat16 does not.
// Shifted to about -48 (a KERPLE bias at a few hundred tokens), the bias moves in steps of 0.25 in
// bfloat16, up to 13% on a probability, far beyond what bf16 products do at |q.k| < 1.
struct ShiftedBias : AttentionBias {
  ShiftedBias(AttentionBias* inner, double shift) : inner(inner), shift(shift) {}
  torch::Tensor block(int64_t q0, int64_t q1, int64_t k0, int64_t k1) override {
    return inner->block(q0, q1, k0, k1) + shift;
  }
  bool trainable() const override { return inner->trainable(); }
  bool blocksFuture() const override { return inner->blocksFuture(); }
  AttentionBias* inner;
  double shift;
};
}  // namespace

TEST_CASE("bf16: every path adds the position bias in float32, within bf16 products of the float64 reference",
          "[attention-paths][precision]") {
  // q, k, v in bfloat16 (as autocast gives them); the reference is the float64 attention of those
  // same bf16 values with the float32 bias: out = softmax(q k^T + bias) v. What a path may differ
  // by is bf16 rounding of its products alone, each 2^-9 relative at most: q.k (moves a logit by
  // 2^-9 M, M = max |q.k|, so a probability by ~2^-8 M relative), the probabilities, and the output.
  // Per element that is at most 2^-9 (|out| + (1 + 2M) S), S = sum_j p_j |v_j|; the test allows
  // twice that (float32 accumulation). Every bias is shifted by -48 (ShiftedBias), where the same
  // attention with the bias rounded to bf16 exceeds the allowance (checked), so the test sees a
  // path that rounds it.
  constexpr int64_t B = 2, T = 260;
  for (const auto& m : test::everyMethod()) {
    auto cfg = test::tinyConfig(m.pos, m.arch);
    Transformer model(cfg);
    if (!model->attentionBias()) continue;  // no bias: nothing to round
    INFO(m.arch << " " << m.pos);
    test::spreadFirstTokenBias(model);
    {
      // T5's table (init N(0, 0.02)) and FIRE's output layer as trained models have them, a few
      // units apart from key to key: a spread of 0.02 would all round to the same -48.
      torch::NoGradGuard g;
      for (auto& p : model->attentionBias()->named_parameters())
        if (p.key() == "buckets.weight" || p.key().rfind("mlp_out.", 0) == 0) p.value().mul_(100.0);
    }
    ShiftedBias shifted(model->attentionBias(), -48.0);
    AttentionBias* bias = &shifted;
    int64_t H = cfg.heads, D = cfg.dModel / H;
    bool causal = cfg.causal();
    torch::NoGradGuard g;
    torch::manual_seed(3);
    auto bf16 = torch::TensorOptions(torch::kBFloat16);
    auto q = (torch::randn({B, H, T, D}) * 0.3).to(bf16), k = (torch::randn({B, H, T, D}) * 0.3).to(bf16);
    auto v = torch::randn({B, H, T, D}).to(bf16);  // (B, H, T, D)

    auto full = attentionBiasBlock(bias, causal, 0, T, 0, T, torch::TensorOptions(torch::kFloat32));  // (H|1, T, T)
    REQUIRE(full.scalar_type() == torch::kFloat32);
    auto d = [](const torch::Tensor& t) { return t.to(torch::kFloat64); };
    auto dots = d(q).matmul(d(k).transpose(-2, -1));  // (B, H, T, T)
    auto attentionWith = [&](const torch::Tensor& b) { return torch::softmax(dots + d(b), -1).matmul(d(v)); };
    auto reference = attentionWith(full);  // (B, H, T, D)
    // The allowance per element, (B, H, T, D): 2 * 2^-9 (|out| + (1 + 2M) S).
    double M = dots.abs().max().item<double>();
    auto S = torch::softmax(dots + d(full), -1).matmul(d(v).abs());
    auto allowance = std::pow(2.0, -8) * (reference.abs() + (1 + 2 * M) * S);
    auto worstRatio = [&](const torch::Tensor& got) {
      return ((d(got) - reference).abs() / allowance).max().item<double>();
    };
    double roundedBias = worstRatio(attentionWith(full.to(torch::kBFloat16)));
    INFO("max |q.k| " << M << "; the bias rounded to bf16 moves the attention by " << roundedBias << " allowances");
    CHECK(roundedBias > 2);

    AttentionContext ctx;
    ctx.causal = causal;
    ctx.bias = bias;
    ctx.fullBias = full;
    double scale = 1.0 / std::sqrt(double(D));
    auto qScaled = (q.to(torch::kFloat32) * std::sqrt(double(D))).to(torch::kBFloat16);  // for the unscaled paths
    std::vector<std::pair<std::string, std::function<torch::Tensor()>>> paths = {
        {"reference", [&] { return referenceAttention(q, k, v, ctx, 0.0, 0); }},
        {"block",
         [&] {
           AttentionContext blocked = ctx;
           blocked.fullBias = torch::Tensor();
           blocked.queryBlock = 64;
           return blockAttention(q, k, v, blocked, 0.0, 0);
         }},
        {"recompute",
         [&] {
           auto blockBias = [&](int64_t q0, int64_t q1, int64_t keys) {
             return attentionBiasBlock(bias, causal, q0, q1, 0, keys, q.options());
           };
           return recomputedAttention(q, k, v, blockBias, {}, causal, 0.0, 7);
         }},
    };
    if (causal) paths.push_back({"causal-skip", [&] { return causalSkipAttention(q, k, v, ctx, 0.0, 0); }});
    if (compat::kHasSdpa) paths.push_back({"sdpa", [&] { return sdpaAttention(qScaled, k, v, ctx, scale, 0.0); }});
    for (const auto& [name, run] : paths) {
      INFO("path " << name);
      AutocastScope autocast(torch::kCPU, torch::kBFloat16);
      auto got = run();
      CHECK(got.scalar_type() == torch::kBFloat16);
      double ratio = worstRatio(got);
      INFO("largest difference " << ratio << " allowances");
      CHECK(ratio <= 1);
    }
  }
}
