#include <catch2/catch.hpp>

#include "model/fast_dropout.h"
#include "model/transformer.h"
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

// Parameters w (decayed) and b (not) with an optimizer of type Optimizer over them.
template <class Optimizer>
std::tuple<torch::Tensor, torch::Tensor, std::unique_ptr<Optimizer>> twoGroups(const torch::Tensor& w0,
                                                                               const torch::Tensor& b0) {
  auto w = w0.clone().requires_grad_(), b = b0.clone().requires_grad_();
  auto options = torch::optim::AdamWOptions(0.01).betas({0.9, 0.98}).weight_decay(0.1);
  auto noDecay = options;
  noDecay.weight_decay(0.0);
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(std::vector<torch::Tensor>{w}, std::make_unique<torch::optim::AdamWOptions>(options));
  groups.emplace_back(std::vector<torch::Tensor>{b}, std::make_unique<torch::optim::AdamWOptions>(noDecay));
  return {w, b, std::make_unique<Optimizer>(groups, options)};
}

TEST_CASE("InPlaceAdamW takes LibTorch AdamW's steps (weight decay, bias correction, two groups)", "[perf]") {
  torch::manual_seed(5);
  // More elements than one slice (2^20), so the slicing is exercised; a vector without decay.
  auto w0 = torch::randn({1100, 1000}), b0 = torch::randn({7});
  auto [wRef, bRef, reference] = twoGroups<torch::optim::AdamW>(w0, b0);
  auto [w, b, mine] = twoGroups<InPlaceAdamW>(w0, b0);
  for (int step = 0; step < 3; ++step) {
    auto gw = torch::randn_like(w0), gb = torch::randn_like(b0);
    wRef.mutable_grad() = gw.clone();
    bRef.mutable_grad() = gb.clone();
    w.mutable_grad() = gw.clone();
    b.mutable_grad() = gb.clone();
    reference->step();
    mine->step();
  }
  REQUIRE(torch::allclose(w, wRef, 1e-6, 1e-7));
  REQUIRE(torch::allclose(b, bRef, 1e-6, 1e-7));
  REQUIRE(!torch::allclose(w, w0));
}
