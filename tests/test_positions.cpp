// Position modules against independent expectations: sinusoidal values, rotary's relative
// property, the ALiBi family's bias blocks against LinearBiasSpec's formula (any block offset),
// T5's bias against its bucket table, KERPLE-log and FIRE against their papers' formulas (computed
// here from the parameters, scalar by scalar), YaRN's rotation, and finite-difference gradients
// of every learned bias parameter; a pretrained rotary's partial rotation, dynamic and longrope
// frequencies by window length and attention factor.
#include <catch2/catch.hpp>
#include <cmath>
#include <functional>

#include "error_of.h"
#include "model/linear_bias_spec.h"
#include "model/position/fire_bias.h"
#include "model/position/kerple_bias.h"
#include "model/position/linear_bias.h"
#include "model/position/rotary.h"
#include "model/position/sinusoidal.h"
#include "model/position/t5_bias.h"
#include "model/t5_buckets.h"

using namespace xtrap;
using xtrap::test::errorOf;

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

namespace {
// Central finite differences of `loss` against every element of every parameter of `bias`
// (float64), compared with autograd's gradient.
void checkGradients(AttentionBias& bias, const std::function<torch::Tensor()>& loss) {
  for (auto& p : bias.parameters()) p.mutable_grad() = torch::Tensor();
  loss().backward();
  const double eps = 1e-6;
  for (const auto& item : bias.named_parameters()) {
    auto p = item.value();
    auto grad = p.grad().clone();
    auto flat = p.data().view({-1});
    for (int64_t k = 0; k < p.numel(); ++k) {
      torch::NoGradGuard g;
      double orig = flat[k].item<double>();
      flat[k] = orig + eps;
      double up = loss().item<double>();
      flat[k] = orig - eps;
      double down = loss().item<double>();
      flat[k] = orig;
      INFO(item.key() << "[" << k << "]");
      CHECK(grad.view({-1})[k].item<double>() == Approx((up - down) / (2 * eps)).epsilon(1e-5).margin(1e-7));
    }
  }
}
}  // namespace

TEST_CASE("KERPLE-log bias: -r1 log(1 + r2 |i - j|) per head, any block") {
  torch::manual_seed(2);
  KerpleLogBias kerple(3);
  auto r1 = kerple.r1(), r2 = kerple.r2();
  // The paper's initialisation: r1 ~ U(0, 2), r2 ~ U(0, 1), at least 0.01.
  CHECK(r1.min().item<double>() >= 0.01);
  CHECK(r1.max().item<double>() <= 2.0);
  CHECK(r2.max().item<double>() <= 1.0);
  for (auto [q0, q1, k0, k1] : {std::array<int64_t, 4>{0, 6, 0, 6}, {4, 9, 1, 12}, {300, 302, 0, 310}}) {
    auto block = kerple.block(q0, q1, k0, k1);
    REQUIRE(block.sizes() == torch::IntArrayRef({3, q1 - q0, k1 - k0}));
    for (int64_t h = 0; h < 3; ++h)
      for (int64_t i = q0; i < q1; ++i)
        for (int64_t j = k0; j < k1; ++j) {
          double expected = -r1[h].item<double>() * std::log(1.0 + r2[h].item<double>() * std::abs(double(i - j)));
          CHECK(block[h][i - q0][j - k0].item<double>() == Approx(expected).epsilon(1e-6).margin(1e-6));
        }
  }
  SECTION("projection after a step: r1, r2 back to >= 0.01") {
    {
      torch::NoGradGuard g;
      kerple.r1().fill_(-0.5);
      kerple.r2()[0] = 0.001;
    }
    kerple.constrainParameters();
    CHECK(kerple.r1().min().item<double>() == Approx(0.01));
    CHECK(kerple.r2()[0].item<double>() == Approx(0.01));
  }
}

TEST_CASE("KERPLE-log: gradients of r1 and r2 match finite differences") {
  torch::manual_seed(4);
  KerpleLogBias kerple(4);
  kerple.to(torch::kFloat64);
  auto weights = torch::randn({4, 5, 9}, torch::kFloat64);
  checkGradients(kerple, [&] { return (kerple.block(3, 8, 0, 9) * weights).sum(); });
}

namespace {
// FIRE's bias for one (head, query, key) straight from the paper's formula, with the MLP
// evaluated weight by weight: f(psi(|i-j|) / psi(max(Lthr, i))), psi(x) = log(|c| x + 1).
double fireByHand(FireBias& fire, int64_t h, int64_t i, int64_t j) {
  auto p = fire.named_parameters();
  double c = std::abs(p["c"].item<double>());
  double threshold =
      std::abs(p["threshold_multiplier"].item<double>() * fire.named_buffers()["threshold_init"].item<double>());
  auto psi = [&](double x) { return std::log(c * x + 1.0); };
  double u = psi(std::abs(double(i - j))) / (psi(std::max(threshold, double(i))) + FireBias::kEpsilon);
  auto w1 = p["mlp_hidden.weight"], b1 = p["mlp_hidden.bias"], w2 = p["mlp_out.weight"], b2 = p["mlp_out.bias"];
  double out = b2[h].item<double>();
  for (int64_t k = 0; k < FireBias::kWidth; ++k)
    out += w2[h][k].item<double>() * std::max(0.0, w1[k][0].item<double>() * u + b1[k].item<double>());
  return out;
}
}  // namespace

TEST_CASE("FIRE bias: the MLP of the progressively interpolated log distance, any block") {
  torch::manual_seed(6);
  FireBias fire(2, 5.0);  // threshold 5: queries 0..4 are normalised by psi(5), later ones by psi(i)
  CHECK(fire.c().item<double>() == Approx(0.1));
  CHECK(fire.threshold().item<double>() == Approx(5.0));
  {
    torch::NoGradGuard g;
    fire.named_parameters()["c"].fill_(0.7);  // away from the initial values, so that each matters
    fire.named_parameters()["threshold_multiplier"].fill_(1.3);
  }
  for (auto [q0, q1, k0, k1] : {std::array<int64_t, 4>{0, 10, 0, 10}, {4, 9, 2, 12}, {700, 702, 0, 710}}) {
    auto block = fire.block(q0, q1, k0, k1);
    REQUIRE(block.sizes() == torch::IntArrayRef({2, q1 - q0, k1 - k0}));
    for (int64_t h = 0; h < 2; ++h)
      for (int64_t i = q0; i < q1; ++i)
        for (int64_t j = k0; j < k1; ++j) {
          INFO("h=" << h << " i=" << i << " j=" << j);
          CHECK(block[h][i - q0][j - k0].item<double>() ==
                Approx(fireByHand(fire, h, i, j)).epsilon(1e-5).margin(1e-6));
        }
  }
  SECTION("progressive interpolation: a query past the threshold sees distances squeezed into [0, 1]") {
    // The key at distance i from query i (key 0) gets f(1) whatever i > threshold is.
    auto far = fire.block(700, 701, 0, 1), nearer = fire.block(50, 51, 0, 1);
    CHECK((far - nearer).abs().max().item<double>() < 1e-5);
  }
}

TEST_CASE("FIRE: gradients of the MLP, c and the threshold match finite differences") {
  torch::manual_seed(8);
  FireBias fire(3, 4.0);
  fire.to(torch::kFloat64);
  {
    torch::NoGradGuard g;
    fire.named_parameters()["threshold_multiplier"].fill_(1.1);  // threshold 4.4: no tie with a query position
    fire.named_parameters()["c"].fill_(0.3);
  }
  auto weights = torch::randn({3, 8, 8}, torch::kFloat64);
  // Queries 0..7 straddle the threshold: both branches of max(Lthr, i) carry a gradient.
  checkGradients(fire, [&] { return (fire.block(0, 8, 0, 8) * weights).sum(); });
}

TEST_CASE("rotary keeps its angles only while every setting, the length, the offset and the dtype stay") {
  torch::manual_seed(4);
  const int64_t D = 8;
  auto x = torch::randn({2, 3, 6, D}, torch::kFloat64);
  Rotary kept{D, 10000.0, 1.0};
  kept.apply(x, 2);
  const void* first = kept.tableCache->cos.data_ptr();
  kept.apply(x, 2);  // the same call again: the same tables
  CHECK(kept.tableCache->cos.data_ptr() == first);
  // One change at a time from the call before: the same output as a Rotary that never computed
  // anything before.
  auto expectFresh = [&](const torch::Tensor& input, int64_t offset, const char* what) {
    INFO(what);
    Rotary fresh{D, kept.base, kept.positionScale, kept.frequencyFactors, kept.attentionFactor};
    CHECK(torch::equal(kept.apply(input, offset), fresh.apply(input, offset)));
  };
  expectFresh(x, 5, "another offset");
  kept.base = 500.0;
  expectFresh(x, 5, "another base");
  kept.positionScale = 3.0;
  expectFresh(x, 5, "another position scale");
  kept.frequencyFactors = {0.5, 0.5, 1.0, 1.0};
  expectFresh(x, 5, "frequency factors");
  kept.frequencyFactors = {0.5, 0.25, 1.0, 1.0};
  expectFresh(x, 5, "other frequency factors");
  expectFresh(x.narrow(2, 0, 4), 5, "a shorter window");
  expectFresh(x.narrow(2, 0, 4).to(torch::kFloat32), 5, "float32 angles");
}

TEST_CASE("yarn rotation: pair d turns by position * theta_d * factor_d, scaled by the attention factor") {
  torch::manual_seed(9);
  const int64_t D = 8;
  Rotary rot{D, 10000.0, 1.0, {0.25, 0.5, 0.75, 1.0}, 1.2};
  auto x = torch::randn({1, 1, 5, D}, torch::kFloat64);
  auto y = rot.apply(x, 3);  // positions 3..7
  for (int64_t t = 0; t < 5; ++t)
    for (int64_t d = 0; d < D / 2; ++d) {
      double angle = double(3 + t) * std::pow(10000.0, -2.0 * double(d) / double(D)) * rot.frequencyFactors[size_t(d)];
      double a = x[0][0][t][d].item<double>(), b = x[0][0][t][d + D / 2].item<double>();
      CHECK(y[0][0][t][d].item<double>() == Approx(1.2 * (a * std::cos(angle) - b * std::sin(angle))));
      CHECK(y[0][0][t][d + D / 2].item<double>() == Approx(1.2 * (b * std::cos(angle) + a * std::sin(angle))));
    }
}

namespace {
// x rotated pair by pair in the first d channels (pairs (p, p + d/2)) by angle(t, p), times f;
// the channels from d on unchanged: transformers' apply_rotary_pos_emb with partial rotary.
torch::Tensor expectedRotation(const torch::Tensor& x, int64_t d, double f,
                               const std::function<double(int64_t, int64_t)>& angle) {
  auto y = x.clone();
  for (int64_t t = 0; t < x.size(2); ++t)
    for (int64_t p = 0; p < d / 2; ++p) {
      double c = std::cos(angle(t, p)), s = std::sin(angle(t, p));
      auto a = x.select(3, p).select(2, t), b = x.select(3, p + d / 2).select(2, t);
      y.select(3, p).select(2, t).copy_(f * (a * c - b * s));
      y.select(3, p + d / 2).select(2, t).copy_(f * (b * c + a * s));
    }
  return y;
}

double largestDifference(const torch::Tensor& a, const torch::Tensor& b) { return (a - b).abs().max().item<double>(); }
}  // namespace

TEST_CASE("pretrained rotary: partial rotary turns the first d channels and passes the rest through") {
  torch::manual_seed(11);
  const int64_t D = 12, d = 4;
  Rotary part = Rotary::make(D, d, 10000.0, RopeScaling{});
  auto x = torch::randn({2, 3, 5, D}, torch::kFloat64);
  auto y = part.apply(x, 7);  // positions 7..11
  CHECK(torch::equal(y.narrow(3, d, D - d), x.narrow(3, d, D - d)));
  auto expected =
      expectedRotation(x, d, 1.0, [&](int64_t t, int64_t p) { return double(7 + t) * std::pow(1e4, -2.0 * p / d); });
  double worst = largestDifference(y, expected);
  INFO("largest difference " << worst);
  CHECK(worst < 1e-12);
}

TEST_CASE("pretrained rotary: dynamic frequencies follow the window's length and reset at the original length") {
  torch::manual_seed(12);
  RopeScaling s;
  s.type = "dynamic", s.factor = 2.0, s.originalMaxPositions = 16;
  Rotary rot = Rotary::make(8, 8, 1e4, s);
  auto x = torch::randn({1, 2, 4, 8}, torch::kFloat64);
  auto withBase = [&](double base, int64_t offset) {
    return expectedRotation(x, 8, 1.0,
                            [&](int64_t t, int64_t p) { return double(offset + t) * std::pow(base, -2.0 * p / 8); });
  };
  // offset 12 + T 4 = 16 = M: the original base; 13 + 4 = 17: 10^4 (2 * 17 / 16 - 1)^(8/6).
  CHECK(largestDifference(rot.apply(x, 12), withBase(1e4, 12)) < 1e-12);
  CHECK(largestDifference(rot.apply(x, 13), withBase(1e4 * std::pow(1.125, 4.0 / 3.0), 13)) < 1e-12);
  CHECK(largestDifference(rot.apply(x, 13), withBase(1e4, 13)) > 1e-6);
  CHECK(largestDifference(rot.apply(x, 12), withBase(1e4, 12)) < 1e-12);  // reset after the longer window
}

TEST_CASE("pretrained rotary: longrope switches the whole window past M and the attention factor scales cos and sin") {
  torch::manual_seed(13);
  // d = 4 of D = 6, M = 8, factor 4: attention factor sqrt(1 + ln 4 / ln 8) = sqrt(5/3).
  RopeScaling s;
  s.type = "longrope", s.factor = 4.0, s.originalMaxPositions = 8;
  s.shortFactor = {1.0, 2.0}, s.longFactor = {4.0, 8.0};
  Rotary rot = Rotary::make(6, 4, 1e4, s);
  auto x = torch::randn({1, 2, 3, 6}, torch::kFloat64);
  auto expected = [&](int64_t offset, const std::vector<double>& e) {
    return expectedRotation(x, 4, std::sqrt(5.0 / 3.0), [&](int64_t t, int64_t p) {
      return double(offset + t) * std::pow(1e4, -2.0 * p / 4) / e[size_t(p)];
    });
  };
  CHECK(largestDifference(rot.apply(x, 5), expected(5, s.shortFactor)) < 1e-12);  // positions 5..7: L = 8
  CHECK(largestDifference(rot.apply(x, 6), expected(6, s.longFactor)) < 1e-12);   // positions 6..8: L = 9
}

TEST_CASE("pretrained rotary: --interp linear divides positions on top of a checkpoint's linear factor") {
  torch::manual_seed(14);
  RopeScaling s;
  s.type = "linear", s.factor = 2.0;
  Rotary rot = Rotary::make(8, 8, 1e4, s);
  rot.positionScale = 3.0;
  auto x = torch::randn({1, 1, 5, 8}, torch::kFloat64);
  auto expected = expectedRotation(
      x, 8, 1.0, [&](int64_t t, int64_t p) { return double(4 + t) / 6.0 * std::pow(1e4, -2.0 * p / 8); });
  CHECK(largestDifference(rot.apply(x, 4), expected) < 1e-12);
  CHECK(errorOf([] { Rotary::make(8, 10, 1e4, RopeScaling{}); }) ==
        "rotary: the rotated channels must be even, >= 2 and <= the head dim 8, got 10");
}
