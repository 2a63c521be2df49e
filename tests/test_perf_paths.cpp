#include <catch2/catch.hpp>

#include "model/fast_dropout.h"
#include "model/recomputed_attention.h"
#include "model/transformer.h"
#include "train/gradient_clip.h"
#include "train/in_place_adamw.h"

using namespace xtrap;

namespace {
// Attaching an observer makes the full path compute the T x T product in one piece.
struct NullObserver : AttentionObserver {
  void onProbabilities(int64_t, int64_t, const torch::Tensor&) override {}
};

ModelConfig smallDecoder(const std::string& pos) {
  ModelConfig c;
  c.pos = pos;
  c.layers = 2;
  c.dModel = 32;
  c.heads = 4;
  c.ffn = 64;
  c.contextLength = 300;  // not a multiple of the skip block: a short last block
  c.vocabSize = 50;
  return c;
}
}  // namespace

TEST_CASE("causal block skipping equals the one-piece and block paths", "[perf]") {
  for (std::string pos : {"none", "alibi", "t5", "rotary", "learned"}) {
    Transformer model(smallDecoder(pos));
    model->eval();
    torch::NoGradGuard noGrad;
    auto tokens = torch::randint(0, 50, {2, 300}, torch::kLong);
    REQUIRE(causalSkipBlock(300) > 0);
    NullObserver observer;
    auto skipped = model->features(tokens);
    auto onePiece = model->features(tokens, {0, &observer});
    auto blocked = model->features(tokens, {64, nullptr});
    INFO(pos);
    REQUIRE((skipped - onePiece).abs().max().item<double>() <= 1e-4);
    REQUIRE((skipped - blocked).abs().max().item<double>() <= 1e-4);
  }
}

TEST_CASE("fast dropout keeps 1 - p of the elements, scaled, and its gradient uses the same mask", "[perf]") {
  torch::manual_seed(3);
  auto x = torch::ones({1 << 20}, torch::requires_grad());
  auto y = fastDropout(x, 0.1, true);
  double kept = (y > 0).to(torch::kFloat64).mean().item<double>();
  REQUIRE(kept == Approx(0.9).margin(0.003));
  REQUIRE(y.max().item<double>() == Approx(1.0 / 0.9));
  y.sum().backward();
  REQUIRE(torch::equal(x.grad(), y.detach()));  // d(sum)/dx = mask * scale = y for x = 1
  torch::manual_seed(3);
  REQUIRE(torch::equal(fastDropout(x, 0.1, true), y));   // reproducible from the seed
  REQUIRE(!torch::equal(fastDropout(x, 0.1, true), y));  // fresh mask on the next call
  REQUIRE(torch::equal(fastDropout(x, 0.1, false), x));
}

TEST_CASE("dropoutMatmul equals fastDropout then matmul, values and gradients, from the same seed", "[perf]") {
  auto probs = torch::softmax(torch::randn({2, 3, 40, 40}), -1).requires_grad_();
  auto v = torch::randn({2, 3, 40, 8}, torch::requires_grad());
  auto dy = torch::randn({2, 3, 40, 8});
  torch::manual_seed(11);
  auto reference = fastDropout(probs, 0.2, true).matmul(v);  // the composition it replaces
  auto gradsRef = torch::autograd::grad({reference}, {probs, v}, {dy});
  torch::manual_seed(11);
  auto fused = dropoutMatmul(probs, v, 0.2, true);
  auto grads = torch::autograd::grad({fused}, {probs, v}, {dy});
  REQUIRE(torch::allclose(fused, reference, 1e-6, 1e-6));
  REQUIRE(torch::allclose(grads[0], gradsRef[0], 1e-6, 1e-6));
  REQUIRE(torch::allclose(grads[1], gradsRef[1], 1e-6, 1e-6));
  REQUIRE(torch::allclose(dropoutMatmul(probs, v, 0.2, false), probs.matmul(v)));
}

// Parameters w (decayed) and b (not), twice: under LibTorch's AdamW (the reference) and under
// InPlaceAdamW, with the same options.
struct AdamWTwins {
  torch::Tensor wRef, bRef, w, b;
  std::unique_ptr<torch::optim::AdamW> reference;
  std::unique_ptr<InPlaceAdamW> mine;

  AdamWTwins(const torch::Tensor& w0, const torch::Tensor& b0)
      : wRef(w0.clone().requires_grad_()),
        bRef(b0.clone().requires_grad_()),
        w(w0.clone().requires_grad_()),
        b(b0.clone().requires_grad_()),
        reference(over<torch::optim::AdamW>(wRef, bRef)),
        mine(over<InPlaceAdamW>(w, b)) {}

  // One step of both: the reference's weight gets `referenceGrad`, the other's `grad` (the same
  // gradient, dense or sparse), both biases `biasGrad`.
  void step(const torch::Tensor& referenceGrad, const torch::Tensor& grad, const torch::Tensor& biasGrad) {
    wRef.mutable_grad() = referenceGrad;
    bRef.mutable_grad() = biasGrad.clone();
    w.mutable_grad() = grad;
    b.mutable_grad() = biasGrad.clone();
    reference->step();
    mine->step();
  }

 private:
  template <class Optimizer>
  static std::unique_ptr<Optimizer> over(const torch::Tensor& weight, const torch::Tensor& bias) {
    auto options = torch::optim::AdamWOptions(0.01).betas({0.9, 0.98}).weight_decay(0.1);
    auto noDecay = options;
    noDecay.weight_decay(0.0);
    std::vector<torch::optim::OptimizerParamGroup> groups;
    groups.emplace_back(std::vector<torch::Tensor>{weight}, std::make_unique<torch::optim::AdamWOptions>(options));
    groups.emplace_back(std::vector<torch::Tensor>{bias}, std::make_unique<torch::optim::AdamWOptions>(noDecay));
    return std::make_unique<Optimizer>(groups, options);
  }
};

TEST_CASE("InPlaceAdamW takes LibTorch AdamW's steps (weight decay, bias correction, two groups)", "[perf]") {
  torch::manual_seed(5);
  // More elements than one slice (2^20), so the slicing is exercised; a vector without decay.
  auto w0 = torch::randn({1100, 1000}), b0 = torch::randn({7});
  AdamWTwins twins(w0, b0);
  for (int step = 0; step < 3; ++step) {
    auto gw = torch::randn_like(w0);
    twins.step(gw.clone(), gw.clone(), torch::randn_like(b0));
  }
  REQUIRE(torch::allclose(twins.w, twins.wRef, 1e-6, 1e-7));
  REQUIRE(torch::allclose(twins.b, twins.bRef, 1e-6, 1e-7));
  REQUIRE(!torch::allclose(twins.w, w0));
}

TEST_CASE("InPlaceAdamW with a sparse gradient takes AdamW's steps with the same gradient dense", "[perf]") {
  torch::manual_seed(6);
  // An embedding-like parameter of more than one slice; each step's gradient has a few rows,
  // given uncoalesced (a row twice) as an embedding's backward gives it.
  auto w0 = torch::randn({2100, 500}), b0 = torch::randn({7});
  AdamWTwins twins(w0, b0);
  for (int step = 0; step < 3; ++step) {
    auto rows = torch::tensor({3, 2099, 3, 1000 + step}, torch::kLong);
    auto values = torch::randn({4, 500});
    auto sparse = torch::sparse_coo_tensor(rows.unsqueeze(0), values, w0.sizes());
    auto dense = torch::zeros_like(w0).index_add_(0, rows, values);
    twins.step(dense, sparse, torch::randn_like(b0));
  }
  // Every row moved (decay and the moments of earlier steps), not only the gradient's rows.
  REQUIRE(torch::allclose(twins.w, twins.wRef, 1e-5, 1e-6));
  REQUIRE(torch::allclose(twins.b, twins.bRef, 1e-6, 1e-7));
  REQUIRE(!torch::equal(twins.w[500], w0[500]));
}

// The expectation is by hand: every gradient times min(1, maxNorm / (norm + 1e-6)). LibTorch 1.13's
// clip_grad_norm_ agrees on dense gradients but leaves a sparse one as it was (its mul_ goes through
// .data(), whose in-place product on a sparse tensor does not reach the gradient), so an untied
// embedding's gradient went unclipped while it counted in the norm.
TEST_CASE("clipGradientNorm scales every gradient, sparse ones included, by the global norm's factor", "[perf]") {
  torch::manual_seed(7);
  auto rows = torch::tensor({4, 1, 4}, torch::kLong);  // uncoalesced: row 4 twice
  auto sparseValues = torch::randn({3, 6});
  for (double maxNorm : {0.5, 1e3}) {  // clipped, and left alone (factor 1)
    std::vector<torch::Tensor> mine, reference;
    for (auto* params : {&mine, &reference}) {
      torch::manual_seed(8);
      for (auto shape : {std::vector<int64_t>{30, 20}, {20}, {}}) {
        params->push_back(torch::zeros(shape, torch::requires_grad()));
        params->back().mutable_grad() = torch::randn(shape);
      }
      params->push_back(torch::zeros({10, 6}, torch::requires_grad()));  // no gradient: left out
      params->push_back(torch::zeros({10, 6}, torch::requires_grad()));
      params->back().mutable_grad() = torch::sparse_coo_tensor(rows.unsqueeze(0), sparseValues, {10, 6}).coalesce();
    }
    std::vector<torch::Tensor> before;  // dense float64 copies, undefined without a gradient
    double squares = 0;
    for (const auto& p : reference) {
      before.push_back(p.grad().defined() ? p.grad().to_dense().to(torch::kFloat64) : torch::Tensor());
      if (before.back().defined()) squares += before.back().square().sum().item<double>();
    }
    const double norm = std::sqrt(squares), factor = std::min(1.0, maxNorm / (norm + 1e-6));
    auto got = clipGradientNorm(mine, maxNorm);
    double libtorchNorm = torch::nn::utils::clip_grad_norm_(reference, maxNorm);
    CHECK(got.dim() == 0);
    CHECK(got.item<double>() == Approx(norm).epsilon(1e-6));
    CHECK(libtorchNorm == Approx(norm).epsilon(1e-6));
    for (size_t i = 0; i < mine.size(); ++i) {
      INFO("parameter " << i << ", maxNorm " << maxNorm);
      REQUIRE(mine[i].grad().defined() == before[i].defined());
      if (!before[i].defined()) continue;
      CHECK(mine[i].grad().is_sparse() == reference[i].grad().is_sparse());
      CHECK(torch::allclose(mine[i].grad().to_dense().to(torch::kFloat64), before[i] * factor, 1e-6, 1e-7));
      if (!mine[i].grad().is_sparse())  // LibTorch's clip_grad_norm_, where it scales
        CHECK(torch::allclose(mine[i].grad(), reference[i].grad(), 1e-6, 1e-7));
    }
  }
}

TEST_CASE("dropBlock: a block of rows gets the keep decisions of the same elements of the whole tensor", "[perf]") {
  // The whole tensor (B*H = 6, T = 10, T = 10); blocks of rows [q0, q1) and keys [0, q1), as the
  // recomputed attention's causal blocks take them.
  auto x = torch::randn({2, 3, 10, 10});
  uint64_t seed = 0x1234567890abULL;
  DroppedBlock whole = dropBlock(x, 0.3, seed, {0, 10, 10});
  double kept = whole.mask.to(torch::kFloat64).mean().item<double>();
  CHECK(kept > 0.55);  // 1 - p = 0.7 of 600 elements
  CHECK(kept < 0.85);
  CHECK(torch::allclose(whole.out, x * whole.mask.to(torch::kFloat32) / 0.7f, 1e-6, 1e-6));
  for (auto [q0, q1] : {std::pair<int64_t, int64_t>{0, 4}, {4, 7}, {7, 10}}) {
    auto block = x.narrow(2, q0, q1 - q0).narrow(3, 0, q1).contiguous();
    DroppedBlock part = dropBlock(block, 0.3, seed, {q0, 10, 10});
    CHECK(torch::equal(part.mask, whole.mask.narrow(2, q0, q1 - q0).narrow(3, 0, q1)));
  }
  CHECK(!torch::equal(dropBlock(x, 0.3, seed + 1, {0, 10, 10}).mask, whole.mask));
}

TEST_CASE("recomputed attention with dropout is the reference composition with dropBlock's mask", "[perf]") {
  constexpr int64_t B = 2, H = 3, T = 37, D = 8;
  constexpr double p = 0.25;
  auto q = torch::randn({B, H, T, D}).requires_grad_(), k = torch::randn({B, H, T, D}).requires_grad_();
  auto v = torch::randn({B, H, T, D}).requires_grad_();
  auto dy = torch::randn({B, H, T, D});
  for (bool causal : {true, false}) {
    INFO((causal ? "causal" : "bidirectional"));
    auto bias = torch::randn({H, T, T});
    if (causal) bias.masked_fill_(torch::ones({T, T}).triu(1).to(torch::kBool), -INFINITY);
    bias.requires_grad_();
    // The mask the recomputed path draws: the seed it takes from the generator, whole-tensor indices.
    torch::manual_seed(3);
    uint64_t seed = drawDropoutSeed();
    auto keep = dropBlock(torch::zeros({B, H, T, T}), p, seed, {0, T, T}).mask.to(torch::kFloat32);  // (B, H, T, T)
    auto reference = (torch::softmax(q.matmul(k.transpose(-2, -1)) + bias, -1) * keep / (1 - p)).matmul(v);
    auto expected = torch::autograd::grad({reference}, {q, k, v, bias}, {dy});
    for (int64_t rows : {5, 37}) {
      INFO("blocks of " << rows << " rows");
      torch::manual_seed(3);
      // The bias of a block: its rows and keys of the (H, T, T) tensor, which is its parameter.
      auto blockBias = [&](int64_t q0, int64_t q1, int64_t keys) {
        return bias.narrow(-2, q0, q1 - q0).narrow(-1, 0, keys);
      };
      auto out = recomputedAttention(q, k, v, blockBias, {bias}, causal, p, rows);
      auto grads = torch::autograd::grad({out}, {q, k, v, bias}, {dy});
      // float32 sums in another order: ~1e-6 of the largest value.
      auto close = [](const torch::Tensor& got, const torch::Tensor& want) {
        double diff = (got - want).abs().max().item<double>(), scale = want.abs().max().item<double>();
        INFO("max |difference| " << diff << ", max |expected| " << scale);
        CHECK(diff <= 1e-5 * scale + 1e-6);
      };
      close(out, reference);
      for (size_t i = 0; i < grads.size(); ++i) {
        INFO("gradient " << i);
        close(grads[i], expected[i]);
      }
    }
  }
}
