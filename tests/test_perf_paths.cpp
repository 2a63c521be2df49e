#include <catch2/catch.hpp>

#include "model/fast_dropout.h"
#include "model/transformer.h"

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
