// Position modules against independent expectations: sinusoidal values, rotary's relative
// property, the ALiBi family's bias blocks against LinearBiasSpec's formula (any block offset),
// T5's bias against its bucket table, and finite-difference gradients of learned bias parameters.
#include <catch2/catch.hpp>
#include <cmath>

#include "model/linear_bias_spec.h"
#include "model/position/linear_bias.h"
#include "model/position/rotary.h"
#include "model/position/sinusoidal.h"
#include "model/position/t5_bias.h"
#include "model/t5_buckets.h"

using namespace xtrap;

TEST_CASE("sinusoidal table values") {
  auto pe = sinusoidalTable(5, 8, torch::TensorOptions());  // d = 8: frequencies 1, 1/10, 1/100, 1/1000
  CHECK(pe[0][0].item<float>() == Approx(0.0));
  CHECK(pe[0][1].item<float>() == Approx(1.0));
  CHECK(pe[1][0].item<float>() == Approx(std::sin(1.0)));
  CHECK(pe[1][1].item<float>() == Approx(std::cos(1.0)));
  CHECK(pe[2][2].item<float>() == Approx(std::sin(0.2)));
  CHECK(pe[3][3].item<float>() == Approx(std::cos(0.3)));
  CHECK(pe[4][6].item<float>() == Approx(std::sin(0.004)));
  CHECK(pe[4][7].item<float>() == Approx(std::cos(0.004)));
}

TEST_CASE("rotary: q_i . k_j depends only on i - j") {
  torch::manual_seed(0);
  Rotary rot{8, 10000.0, 1.0};
  auto q = torch::randn({1, 1, 1, 8}, torch::kFloat64).expand({1, 1, 12, 8});
  auto k = torch::randn({1, 1, 1, 8}, torch::kFloat64).expand({1, 1, 12, 8});
  auto dots = rot.apply(q).matmul(rot.apply(k).transpose(-2, -1))[0][0];  // (12, 12)
  for (int64_t d = -11; d <= 11; ++d) {
    auto diag = dots.diagonal(d);
    CHECK((diag - diag[0]).abs().max().item<double>() < 1e-9);
  }
  // ...and rotation changes it with distance (it is not a no-op).
  CHECK(std::abs(dots[0][0].item<double>() - dots[5][0].item<double>()) > 1e-6);
  SECTION("position interpolation: positions / a") {
    Rotary scaled{8, 10000.0, 2.0};
    auto at2 = scaled.apply(q).narrow(2, 2, 1);
    auto at1 = rot.apply(q).narrow(2, 1, 1);
    CHECK((at2 - at1).abs().max().item<double>() < 1e-9);
  }
}

TEST_CASE("ALiBi-family bias blocks equal the LinearBiasSpec formula") {
  struct Case {
    PositionMethod method;
    int64_t heads;
    bool causal;
  };
  for (Case c : {Case{PositionMethod::Alibi, 8, true}, Case{PositionMethod::Alibi, 6, false},
                 Case{PositionMethod::AlibiOffset, 12, false}, Case{PositionMethod::AlibiOneSided, 4, false},
                 Case{PositionMethod::AlibiLearned, 6, false}, Case{PositionMethod::BiAlibi, 4, false}}) {
    LinearBiasSpec spec = makeLinearBiasSpec(c.method, c.heads, c.causal);
    LinearBias bias(spec, false);
    if (spec.hasFirstTokenBias) bias.firstTokenBias().data().copy_(torch::linspace(-1, 1, c.heads));
    for (auto [q0, q1, k0, k1] : {std::array<int64_t, 4>{0, 7, 0, 7}, {3, 9, 1, 12}, {0, 1, 0, 5}}) {
      auto block = bias.block(q0, q1, k0, k1);
      REQUIRE(block.sizes() == torch::IntArrayRef({c.heads, q1 - q0, k1 - k0}));
      for (int64_t h = 0; h < c.heads; ++h)
        for (int64_t i = q0; i < q1; ++i)
          for (int64_t j = k0; j < k1; ++j) {
            double ftb = spec.hasFirstTokenBias ? bias.firstTokenBias()[h].item<double>() : 0.0;
            double expected = spec.bias(h, i, j, ftb);
            double got = block[h][i - q0][j - k0].item<double>();
            INFO(positionMethodName(c.method) << " h=" << h << " i=" << i << " j=" << j);
            if (std::isinf(expected))
              CHECK(got == expected);
            else
              CHECK(got == Approx(expected).margin(1e-6));
          }
    }
  }
}

TEST_CASE("alibi-learned random init: slopes = sigmoid(p), p ~ N(-2, 1), seeded") {
  torch::manual_seed(5);
  LinearBias a(makeLinearBiasSpec(PositionMethod::AlibiLearned, 64, false), true);
  torch::manual_seed(5);
  LinearBias b(makeLinearBiasSpec(PositionMethod::AlibiLearned, 64, false), true);
  CHECK(torch::equal(a.slopePast(), b.slopePast()));
  auto p = torch::logit(a.slopePast().to(torch::kFloat64));
  CHECK(p.mean().item<double>() == Approx(-2.0).margin(0.4));  // 64 draws: sd of the mean 0.125
  CHECK(p.std().item<double>() == Approx(1.0).margin(0.3));
}

TEST_CASE("T5 bias block looks up the bucket of every distance") {
  torch::manual_seed(1);
  T5Bias t5(3, 32, 128, false);
  auto table = t5.parameters()[0];  // (32, 3)
  auto block = t5.block(20, 30, 0, 30);
  for (int64_t h = 0; h < 3; ++h)
    for (int64_t i = 20; i < 30; ++i)
      for (int64_t j = 0; j < 30; ++j)
        CHECK(block[h][i - 20][j].item<float>() == table[t5RelativeBucket(j - i, false, 32, 128)][h].item<float>());
}

TEST_CASE("learned slopes and first-token bias: gradients match finite differences") {
  torch::manual_seed(3);
  LinearBias bias(makeLinearBiasSpec(PositionMethod::BiAlibi, 4, false), false);
  bias.to(torch::kFloat64);
  auto weights = torch::randn({4, 6, 6}, torch::kFloat64);
  auto loss = [&] { return (bias.block(0, 6, 0, 6) * weights).sum(); };
  for (auto& p : bias.parameters()) p.data().add_(torch::randn_like(p) * 0.3);
  auto l = loss();
  l.backward();
  const double eps = 1e-6;
  for (auto& p : bias.parameters()) {
    auto grad = p.grad().clone();
    for (int64_t k = 0; k < p.numel(); ++k) {
      torch::NoGradGuard g;
      double orig = p.data()[k].item<double>();
      p.data()[k] = orig + eps;
      double up = loss().item<double>();
      p.data()[k] = orig - eps;
      double down = loss().item<double>();
      p.data()[k] = orig;
      CHECK(grad[k].item<double>() == Approx((up - down) / (2 * eps)).epsilon(1e-5).margin(1e-7));
    }
  }
}
