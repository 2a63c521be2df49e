// ALiBi slopes and the LinearBiasSpec of every variant against hand-written values, the T5 bucket
// function at chosen distances, and the interpolation transforms against their formulas.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>

#include "model/interpolation.h"
#include "model/linear_bias_spec.h"
#include "model/t5_buckets.h"

using namespace xtrap;
namespace {
const double kInf = std::numeric_limits<double>::infinity();

void checkRows(const LinearBiasSpec& spec, int64_t h, const std::vector<std::vector<double>>& expected,
               double firstTokenBias = 0.0) {
  for (size_t i = 0; i < expected.size(); ++i)
    for (size_t j = 0; j < expected[i].size(); ++j) {
      INFO("head " << h << " row " << i << " col " << j);
      CHECK(spec.bias(h, int64_t(i), int64_t(j), firstTokenBias) == Approx(expected[i][j]));
    }
}
}  // namespace

TEST_CASE("standard ALiBi slopes") {
  SECTION("H = 8: 1/2 ... 1/256") {
    auto m = standardAlibiSlopes(8);
    std::vector<double> expected{1. / 2, 1. / 4, 1. / 8, 1. / 16, 1. / 32, 1. / 64, 1. / 128, 1. / 256};
    REQUIRE(m.size() == 8);
    for (size_t h = 0; h < 8; ++h) CHECK(m[h] == Approx(expected[h]));
  }
  SECTION("H = 16: 2^(-0.5 h)") {
    auto m = standardAlibiSlopes(16);
    for (size_t h = 0; h < 16; ++h) CHECK(m[h] == Approx(std::pow(2.0, -0.5 * double(h + 1))));
  }
  SECTION("H = 6: the 4-head slopes, then every other slope of the 8-head set") {
    auto m = standardAlibiSlopes(6);
    std::vector<double> expected{1. / 4, 1. / 16, 1. / 64, 1. / 256, 1. / 2, 1. / 8};
    REQUIRE(m.size() == 6);
    for (size_t h = 0; h < 6; ++h) CHECK(m[h] == Approx(expected[h]));
  }
  SECTION("H = 12: the 8-head slopes, then 2^-0.5, 2^-1.5, 2^-2.5, 2^-3.5") {
    auto m = standardAlibiSlopes(12);
    REQUIRE(m.size() == 12);
    for (size_t h = 0; h < 8; ++h) CHECK(m[h] == Approx(std::pow(2.0, -double(h + 1))));
    for (size_t k = 0; k < 4; ++k) CHECK(m[8 + k] == Approx(std::pow(2.0, -0.5 - double(k))));
  }
}

TEST_CASE("decoder alibi: causal, -m (i - j)") {
  auto spec = makeLinearBiasSpec(PositionMethod::Alibi, 8, true);
  checkRows(spec, 0, {{0, -kInf, -kInf, -kInf}, {-0.5, 0, -kInf, -kInf}, {-1, -0.5, 0, -kInf}, {-1.5, -1, -0.5, 0}});
  checkRows(spec, 7, {{0, -kInf, -kInf}, {-1. / 256, 0, -kInf}, {-2. / 256, -1. / 256, 0}});
  CHECK_THROWS_WITH(makeLinearBiasSpec(PositionMethod::AlibiOffset, 8, true), Catch::Contains("decoders use alibi"));
}

TEST_CASE("encoder alibi: symmetric -m |i - j|") {
  auto spec = makeLinearBiasSpec(PositionMethod::Alibi, 8, false);
  checkRows(spec, 0, {{0, -0.5, -1}, {-0.5, 0, -0.5}, {-1, -0.5, 0}});
}

TEST_CASE("alibi-offset: past -m (i - j), future -m (j - i - 0.5), m = 1, L = 5") {
  auto spec = makeLinearBiasSpec(PositionMethod::AlibiOffset, 1, false);
  spec.slopePast = {1.0};
  spec.slopeFuture = {1.0};
  checkRows(spec, 0,
            {{0, -.5, -1.5, -2.5, -3.5},
             {-1, 0, -.5, -1.5, -2.5},
             {-2, -1, 0, -.5, -1.5},
             {-3, -2, -1, 0, -.5},
             {-4, -3, -2, -1, 0}});
}

TEST_CASE("alibi-onesided, H = 4: heads 0-1 past only, heads 2-3 future only, slopes of H = 2") {
  auto spec = makeLinearBiasSpec(PositionMethod::AlibiOneSided, 4, false);
  const double a = 1. / 16, b = 1. / 256;  // standardAlibiSlopes(2)
  checkRows(spec, 0, {{0, -kInf, -kInf}, {-a, 0, -kInf}, {-2 * a, -a, 0}});
  checkRows(spec, 1, {{0, -kInf, -kInf}, {-b, 0, -kInf}, {-2 * b, -b, 0}});
  checkRows(spec, 2, {{0, -a, -2 * a}, {-kInf, 0, -a}, {-kInf, -kInf, 0}});
  checkRows(spec, 3, {{0, -b, -2 * b}, {-kInf, 0, -b}, {-kInf, -kInf, 0}});
  CHECK_THROWS_WITH(makeLinearBiasSpec(PositionMethod::AlibiOneSided, 6 - 1, false),
                    "alibi-onesided needs an even number of heads");
}

TEST_CASE("alibi-learned and bialibi: standard initial slopes, learned flags, first-token bias") {
  auto learned = makeLinearBiasSpec(PositionMethod::AlibiLearned, 6, false);
  CHECK(learned.learnedSlopes);
  CHECK_FALSE(learned.hasFirstTokenBias);
  CHECK(learned.slopeFuture[4] == Approx(0.5));  // H = 6: fifth slope is 1/2
  auto bi = makeLinearBiasSpec(PositionMethod::BiAlibi, 2, false);
  CHECK(bi.hasFirstTokenBias);
  // H = 2 slopes: 1/16, 1/256; the first-token bias b = 0.3 replaces the distance term on every
  // pair touching position 0 (LittleBird's global token), (0, 0) included
  checkRows(bi, 0, {{0.3, 0.3, 0.3, 0.3}, {0.3, 0, -1. / 16, -2. / 16}, {0.3, -1. / 16, 0, -1. / 16}}, 0.3);
  checkRows(bi, 1, {{-0.2, -0.2, -0.2}, {-0.2, 0, -1. / 256}, {-0.2, -1. / 256, 0}}, -0.2);
}

TEST_CASE("T5 relative buckets (32 buckets, max distance 128)") {
  // decoder: relative = j - i <= 0; exact below 16, then log bins up to 128
  CHECK(t5RelativeBucket(0, false, 32, 128) == 0);
  CHECK(t5RelativeBucket(-5, false, 32, 128) == 5);
  CHECK(t5RelativeBucket(-15, false, 32, 128) == 15);
  CHECK(t5RelativeBucket(-16, false, 32, 128) == 16);
  CHECK(t5RelativeBucket(-20, false, 32, 128) == 17);  // 16 + floor(16 ln(1.25)/ln 8) = 16 + 1
  CHECK(t5RelativeBucket(-64, false, 32, 128) == 26);  // 16 + floor(16 * 2/3)
  CHECK(t5RelativeBucket(-127, false, 32, 128) == 31);
  CHECK(t5RelativeBucket(-5000, false, 32, 128) == 31);
  CHECK(t5RelativeBucket(7, false, 32, 128) == 0);  // the future is one bucket
  // encoder: 16 buckets per direction, future offset by 16
  CHECK(t5RelativeBucket(-3, true, 32, 128) == 3);
  CHECK(t5RelativeBucket(3, true, 32, 128) == 19);
  CHECK(t5RelativeBucket(-20, true, 32, 128) == 10);  // 8 + floor(8 ln(2.5)/ln 16) = 8 + 2
  CHECK(t5RelativeBucket(200, true, 32, 128) == 31);
}

TEST_CASE("interpolation transforms") {
  auto m8 = standardAlibiSlopes(8);
  SECTION("linear divides every slope by a") {
    auto d = slopeDivisors(Interp::Linear, 3.0, m8);
    for (double x : d) CHECK(x == Approx(3.0));
  }
  SECTION("NTK, H = 8, a = 2 and 4: m_h = 2^(-8h/H) / a^((h-1)/(H-1))") {
    for (double a : {2.0, 4.0}) {
      auto d = slopeDivisors(Interp::Ntk, a, m8);
      for (int h = 1; h <= 8; ++h) {
        double expected = std::pow(2.0, -8.0 * h / 8) / std::pow(a, double(h - 1) / 7.0);
        CHECK(m8[h - 1] / d[h - 1] == Approx(expected));
      }
      CHECK(d[0] == Approx(1.0));
      CHECK(d[7] == Approx(a));
    }
  }
  SECTION("NTK, H = 12: the per-rank factor applied to the slopes sorted largest first") {
    auto m12 = standardAlibiSlopes(12);
    auto d = slopeDivisors(Interp::Ntk, 4.0, m12);
    // Largest slope is 2^-0.5 (head 8): unchanged; smallest 2^-8 (head 7): divided by 4.
    // Sorted: 2^-0.5(h8) 2^-1(h0) 2^-1.5(h9) 2^-2(h1) 2^-2.5(h10) 2^-3(h2) 2^-3.5(h11) 2^-4(h3) ...
    std::vector<int> rankOfHead{1, 3, 5, 7, 8, 9, 10, 11, 0, 2, 4, 6};
    for (int h = 0; h < 12; ++h) CHECK(d[h] == Approx(std::pow(4.0, rankOfHead[h] / 11.0)));
  }
  SECTION("NTK with --ntk-heads leading-power-of-two is keezen/ntk_alibi's code for H = 6 and 12") {
    // keezen's build_alibi_tensor: P = 2^floor(log2 H), scale = a^(1/(H-1)),
    // base = 2^(-2^-(log2 P - 3)) / scale, slopes = base^h * scale (h = 1..P), then
    // 2^(-2^-(log2 2P - 3))^(1, 3, 5, ...) for the min(P, H - P) extra heads, unscaled.
    for (int H : {6, 12}) {
      for (double a : {2.0, 8.0}) {
        INFO("H = " << H << ", a = " << a);
        double P = std::pow(2.0, std::floor(std::log2(double(H)))), scale = std::pow(a, 1.0 / (H - 1));
        double base = std::pow(2.0, -std::pow(2.0, -(std::log2(P) - 3))) / scale;
        std::vector<double> keezen;
        for (int h = 1; h <= int(P); ++h) keezen.push_back(std::pow(base, h) * scale);
        double extraBase = std::pow(2.0, -std::pow(2.0, -(std::log2(2 * P) - 3)));
        for (int k = 0; k < std::min(int(P), H - int(P)); ++k) keezen.push_back(std::pow(extraBase, 2 * k + 1));
        REQUIRE(keezen.size() == size_t(H));
        auto m = standardAlibiSlopes(H);
        auto d = slopeDivisors(Interp::Ntk, a, m, NtkHeads::LeadingPowerOfTwo);
        for (int h = 0; h < H; ++h) CHECK(m[h] / d[h] == Approx(keezen[h]).epsilon(1e-12));
        // The default ranks all H slopes instead: the steepest (an extra head) is unchanged, the
        // flattest divided by a, which keezen's rule never reaches.
        auto ranked = slopeDivisors(Interp::Ntk, a, m);
        CHECK(*std::max_element(ranked.begin(), ranked.end()) == Approx(a));
        CHECK(*std::max_element(d.begin(), d.end()) < a);
      }
    }
    // A causal spec's future direction has no heads: nothing to scale under either rule.
    CHECK(slopeDivisors(Interp::Ntk, 4.0, {}, NtkHeads::LeadingPowerOfTwo).empty());
    // For a power-of-2 H both rules are the same formula.
    auto m16 = standardAlibiSlopes(16);
    auto all = slopeDivisors(Interp::Ntk, 3.0, m16),
         leading = slopeDivisors(Interp::Ntk, 3.0, m16, NtkHeads::LeadingPowerOfTwo);
    for (int h = 0; h < 16; ++h) CHECK(all[h] == Approx(leading[h]));
    CHECK(parseNtkHeads("leading-power-of-two") == NtkHeads::LeadingPowerOfTwo);
    CHECK_THROWS_WITH(parseNtkHeads("keezen"), Catch::Contains("valid: all, leading-power-of-two"));
    CHECK(interpLabel(Interp::Ntk, NtkHeads::LeadingPowerOfTwo) == "ntk/leading-power-of-two");
    CHECK(interpLabel(Interp::Linear, NtkHeads::LeadingPowerOfTwo) == "linear");
  }
  SECTION("linear and ntk: one fixed a for the sweep, the longest Lvalid / L_train unless --scale") {
    CHECK(staticInterpolationScale(3072, 512, 0) == 6.0);
    CHECK(staticInterpolationScale(3072, 512, 2.5) == 2.5);
    for (Interp interp : {Interp::Linear, Interp::Ntk}) {
      InterpolationPlan plan = interpolationPlan(interp, 3072, 512, 0, 1.0);
      for (int64_t len : {100, 512, 1024, 3072}) CHECK(plan.scaleFor(len) == 6.0);  // the window length is ignored
    }
    CHECK(interpolationPlan(Interp::None, 3072, 512, 2.5, 1.0).scaleFor(3072) == 1.0);
  }
  SECTION("dynamic NTK: a = max(a0 * len / L_train, 1) from each window's own length") {
    InterpolationPlan plan = interpolationPlan(Interp::DynamicNtk, 4096, 512, 0, 1.0);
    CHECK(plan.scaleFor(256) == 1.0);
    CHECK(plan.scaleFor(512) == 1.0);
    CHECK(plan.scaleFor(1536) == 3.0);
    CHECK(plan.scaleFor(700) == Approx(700.0 / 512));  // a last partial window gets its own a
    CHECK(interpolationPlan(Interp::DynamicNtk, 4096, 512, 0, 2.0).scaleFor(2048) == 8.0);
    for (double x : slopeDivisors(Interp::DynamicNtk, 1.0, m8)) CHECK(x == 1.0);
  }
  SECTION("a is clamped to >= 1 for every method: interpolation never steepens the slopes") {
    CHECK(staticInterpolationScale(256, 512, 0) == 1.0);  // a sweep shorter than L_train
    CHECK(staticInterpolationScale(2048, 512, 0.5) == 1.0);
    CHECK(interpolationPlan(Interp::Linear, 128, 512, 0, 1.0).scaleFor(128) == 1.0);
    CHECK(interpolationPlan(Interp::DynamicNtk, 128, 512, 0, 0.5).scaleFor(512) == 1.0);
  }
  SECTION("NTK, alibi-onesided H = 8: past heads 0-3 and future heads 4-7 ranked as two 4-head ALiBis") {
    LinearBiasSpec spec = makeLinearBiasSpec(PositionMethod::AlibiOneSided, 8, false);
    // Each half has the 4-head slopes 1/4, 1/16, 1/64, 1/256; NTK with a = 3 divides the k-th
    // steepest (k = 0..3) of each half by 3^(k/3). One list of 8 would instead rank the two
    // 1/4 heads 1st and 2nd (3^0, 3^(1/7)).
    SlopeDivisors d =
        directionalSlopeDivisors(Interp::Ntk, 3.0, spec.slopePast, spec.slopeFuture, spec.blockPast, spec.blockFuture);
    for (int k = 0; k < 4; ++k) {
      CHECK(d.past[k] == Approx(std::pow(3.0, k / 3.0)));
      CHECK(d.future[4 + k] == Approx(std::pow(3.0, k / 3.0)));
      CHECK(d.past[4 + k] == 1.0);  // blocked directions are in no ranking
      CHECK(d.future[k] == 1.0);
    }
  }
  SECTION("NTK with learned past and future slopes ranks each direction among itself") {
    std::vector<double> past{0.1, 0.5, 0.3}, future{0.9, 0.05, 0.2};
    std::vector<bool> open(3, false);
    SlopeDivisors d = directionalSlopeDivisors(Interp::Ntk, 4.0, past, future, open, open);
    // past ranks: head 1 (0.5) r=1, head 2 (0.3) r=2, head 0 (0.1) r=3 -> 4^0, 4^(1/2), 4^1
    CHECK(d.past[1] == Approx(1.0));
    CHECK(d.past[2] == Approx(2.0));
    CHECK(d.past[0] == Approx(4.0));
    // future ranks: head 0 (0.9) r=1, head 2 (0.2) r=2, head 1 (0.05) r=3
    CHECK(d.future[0] == Approx(1.0));
    CHECK(d.future[2] == Approx(2.0));
    CHECK(d.future[1] == Approx(4.0));
  }
  SECTION("rotary: position interpolation and NTK-aware base") {
    auto lin = rotaryInterpolation(Interp::Linear, 4.0, 10000.0, 16, 128);
    CHECK(lin.positionScale == 4.0);
    CHECK(lin.base == 10000.0);
    CHECK(lin.frequencyFactors.empty());
    auto ntk = rotaryInterpolation(Interp::Ntk, 4.0, 10000.0, 16, 128);
    CHECK(ntk.base == Approx(10000.0 * std::pow(4.0, 16.0 / 14.0)));
  }
}

namespace {
// YaRN's per-pair frequency factors as its authors compute them (jquesnelle/yarn,
// LlamaYaRNScaledRotaryEmbedding.yarn; Hugging Face's _compute_yarn_parameters), transcribed:
// find_correction_dim(n) = D ln(L / (n 2 pi)) / (2 ln b); low = max(floor(dim(beta_fast = 32)), 0),
// high = min(ceil(dim(beta_slow = 1)), D - 1); linear_ramp_mask(low, high)[i] = clamp((i - low) /
// (high - low), 0, 1); inv_freq_mask = 1 - ramp (the weight of the original frequency);
// inv_freq = (1 / (s b^(2i/D))) (1 - mask) + (1 / b^(2i/D)) mask. Returned as inv_freq / theta_i.
std::vector<double> authorsYarnFactors(int D, double b, double L, double s) {
  auto correctionDim = [&](double rotations) { return D * std::log(L / (rotations * 2 * M_PI)) / (2 * std::log(b)); };
  double low = std::max(std::floor(correctionDim(32)), 0.0), high = std::min(std::ceil(correctionDim(1)), D - 1.0);
  if (low == high) high += 0.001;
  std::vector<double> factors;
  for (int i = 0; i < D / 2; ++i) {
    double theta = 1.0 / std::pow(b, 2.0 * i / D);
    double mask = 1.0 - std::min(std::max((i - low) / (high - low), 0.0), 1.0);
    factors.push_back((theta / s * (1 - mask) + theta * mask) / theta);
  }
  return factors;
}
}  // namespace

TEST_CASE("yarn: NTK-by-parts frequencies and temperature as the authors' code computes them") {
  const double b = 10000.0;
  SECTION("D = 16, L = 128, s = 16, by hand") {
    // dim(32) = 16 ln(128 / 64pi) / (2 ln b) = -0.39 -> low 0; dim(1) = 16 ln(128 / 2pi) / (2 ln b)
    // = 2.62 -> high 3. Ramp 0, 1/3, 2/3, 1: pair 0 keeps its frequency, pair 1 is
    // (1/3) / 16 + 2/3 = 0.6875, pair 2 (2/3) / 16 + 1/3 = 0.375, pairs 3.. 1/16.
    RotarySettings yarn = rotaryInterpolation(Interp::Yarn, 16.0, b, 16, 128);
    REQUIRE(yarn.frequencyFactors.size() == 8);
    CHECK(yarn.base == b);
    CHECK(yarn.positionScale == 1.0);
    CHECK(yarn.frequencyFactors[0] == Approx(1.0));
    CHECK(yarn.frequencyFactors[1] == Approx(0.6875));
    CHECK(yarn.frequencyFactors[2] == Approx(0.375));
    for (size_t d = 3; d < 8; ++d) CHECK(yarn.frequencyFactors[d] == Approx(1.0 / 16));
    CHECK(yarn.attentionFactor == Approx(1.0 + 0.1 * std::log(16.0)));  // 1.2773, get_mscale(16)
  }
  SECTION("D = 128, L = 4096, s = 16, by hand: the ramp from pair 20 to pair 46") {
    // dim(32) = 128 ln(4096 / 64pi) / (2 ln b) = 20.95 -> 20; dim(1) = 45.03 -> 46.
    RotarySettings yarn = rotaryInterpolation(Interp::Yarn, 16.0, b, 128, 4096);
    REQUIRE(yarn.frequencyFactors.size() == 64);
    CHECK(yarn.frequencyFactors[20] == Approx(1.0));
    CHECK(yarn.frequencyFactors[33] == Approx(0.5 / 16 + 0.5));  // 0.53125: ramp 13 / 26
    CHECK(yarn.frequencyFactors[46] == Approx(1.0 / 16));
    CHECK(yarn.frequencyFactors[19] == 1.0);
  }
  SECTION("every pair equals the authors' formula") {
    for (int D : {8, 16, 64, 128})
      for (double L : {16.0, 128.0, 512.0, 4096.0, double(1 << 20)})
        for (double s : {1.0, 2.0, 4.0, 32.0}) {
          auto expected = authorsYarnFactors(D, b, L, s);
          RotarySettings yarn = rotaryInterpolation(Interp::Yarn, s, b, D, int64_t(L));
          REQUIRE(yarn.frequencyFactors.size() == expected.size());
          for (size_t d = 0; d < expected.size(); ++d) {
            INFO("D " << D << " L " << L << " s " << s << " pair " << d);
            CHECK(yarn.frequencyFactors[d] == Approx(expected[d]).epsilon(1e-12));
          }
          CHECK(yarn.attentionFactor == Approx(s <= 1 ? 1.0 : 0.1 * std::log(s) + 1.0));
        }
  }
  SECTION("s = 1 changes nothing") {
    RotarySettings none = rotaryInterpolation(Interp::Yarn, 1.0, b, 16, 128);
    for (double f : none.frequencyFactors) CHECK(f == Approx(1.0));
    CHECK(none.attentionFactor == 1.0);
  }
  CHECK(usesFixedScale(Interp::Yarn));
  CHECK(parseInterp("yarn") == Interp::Yarn);
  CHECK(interpName(Interp::Yarn) == "yarn");
  SECTION("dynamic-yarn: the same formulas at a = max(a0 len / L_train, 1) of each window") {
    InterpolationPlan plan = interpolationPlan(Interp::DynamicYarn, 4096, 128, 0, 1.0);
    CHECK(plan.scaleFor(64) == 1.0);   // shorter than L_train: unchanged
    CHECK(plan.scaleFor(512) == 4.0);  // 512 / 128
    CHECK(interpolationPlan(Interp::DynamicYarn, 4096, 128, 0, 0.5).scaleFor(512) == 2.0);
    // The ramp stays over L_train (the authors' original_max_position_embeddings); only the
    // scale follows the window: D = 16, L = 128, s = 4 gives 1, 1/12 + 2/3, 1/6 + 1/3, 1/4...
    RotarySettings dynamic = rotaryInterpolation(Interp::DynamicYarn, plan.scaleFor(512), b, 16, 128);
    REQUIRE(dynamic.frequencyFactors.size() == 8);
    CHECK(dynamic.frequencyFactors[0] == Approx(1.0));
    CHECK(dynamic.frequencyFactors[1] == Approx(0.75));
    CHECK(dynamic.frequencyFactors[2] == Approx(0.5));
    for (size_t d = 3; d < 8; ++d) CHECK(dynamic.frequencyFactors[d] == Approx(0.25));
    CHECK(dynamic.attentionFactor == Approx(1.0 + 0.1 * std::log(4.0)));
    CHECK_FALSE(usesFixedScale(Interp::DynamicYarn));
    CHECK(isYarn(Interp::DynamicYarn));
    CHECK(isDynamic(Interp::DynamicYarn));
    CHECK(parseInterp("dynamic-yarn") == Interp::DynamicYarn);
    CHECK(interpName(Interp::DynamicYarn) == "dynamic-yarn");
  }
}
