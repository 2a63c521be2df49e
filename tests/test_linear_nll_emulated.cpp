// linearNll's CUDA passes (linear_nll.cu) run on the CPU through tests/cuda_emulation: the
// kernels' own code, lanes and shuffles. Checked against double-precision formulas written out
// again here (linear_nll.cuh):
//   forward:  lse[r] <- logaddexp(lse[r], log sum_c exp(x[r, c] + bias[c])), and the target's
//             x + bias for rows whose target lies in [begin, begin + n);
//   backward: grad[r, c] = (exp(x[r, c] + bias[c] - lse[r]) - [c == target_r - begin]) * dNll[r],
// with x the bf16 logits. Shapes cover the 16-byte path and the one-at-a-time path (row stride or
// class count not a multiple of 8), rows past the last warp's, blocks wider than a warp's pass,
// a NaN row (its lse NaN, no other row touched) and a row of -inf logits (lse unchanged).
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "cuda_emulation.h"
#include "device_buffer.h"
#include "model/linear_nll.cuh"

using cuda_emulation::Buffer;
using bf16 = __nv_bfloat16;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr float kUnset = -12345.f;  // a target logit the forward must leave alone

struct Shape {
  int64_t rows, classes, stride, begin, vocabulary;
  bool bias;
};

struct Case {
  Shape shape;
  Buffer<bf16> logits;
  Buffer<float> bias, lse, targetLogit, gradNll;
  Buffer<int64_t> targets;
  std::vector<double> x;  // (rows, classes) the bf16 logits + bias, in double

  explicit Case(const Shape& s)
      : shape(s),
        logits(size_t(s.rows * s.stride)),
        bias(size_t(s.classes)),
        lse(size_t(s.rows)),
        targetLogit(size_t(s.rows)),
        gradNll(size_t(s.rows)),
        targets(size_t(s.rows)),
        x(size_t(s.rows * s.classes)) {
    std::mt19937 gen(uint32_t(s.rows * 131 + s.classes * 7 + s.stride));
    std::normal_distribution<float> normal(0.f, 3.f);
    std::uniform_int_distribution<int64_t> target(0, s.vocabulary - 1);
    for (int64_t c = 0; c < s.classes; ++c) bias[size_t(c)] = s.bias ? normal(gen) : 0.f;
    for (int64_t r = 0; r < s.rows; ++r) {
      // The running log-sum-exp of earlier blocks: none yet in row 0, some in the others.
      lse[size_t(r)] = r == 0 ? -std::numeric_limits<float>::infinity() : normal(gen) + 4.f;
      targetLogit[size_t(r)] = kUnset;
      gradNll[size_t(r)] = 0.25f + 0.01f * float(r);
      // Every other row's target inside the block, the rest anywhere in the vocabulary.
      targets[size_t(r)] = r % 2 ? s.begin + (r * 7) % s.classes : target(gen);
      for (int64_t c = 0; c < s.stride; ++c) {
        const bf16 v = __float2bfloat16(normal(gen));
        logits[size_t(r * s.stride + c)] = v;
        if (c < s.classes) x[size_t(r * s.classes + c)] = double(__bfloat162float(v)) + double(bias[size_t(c)]);
      }
    }
  }

  xtrap::cuda::NllBlock block() const {
    xtrap::cuda::NllBlock b;
    b.logits = logits.data();
    b.rows = shape.rows;
    b.classes = shape.classes;
    b.stride = shape.stride;
    b.bias = shape.bias ? bias.data() : nullptr;
    b.targets = targets.data();
    b.begin = shape.begin;
    return b;
  }

  void setRow(int64_t r, float value) {
    for (int64_t c = 0; c < shape.classes; ++c) {
      logits[size_t(r * shape.stride + c)] = __float2bfloat16(value);
      x[size_t(r * shape.classes + c)] = double(value) + double(bias[size_t(c)]);
    }
  }
};

double logAddExp(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return a + b;
  double mx = std::max(a, b);
  if (std::isinf(mx)) return mx;
  return mx + std::log1p(std::exp(std::min(a, b) - mx));
}

// The forward's expected lse and target logits, from the case's inputs (before the kernel runs).
struct Expected {
  std::vector<double> lse, targetLogit;
};
Expected expectedForward(const Case& k) {
  const Shape& s = k.shape;
  Expected e;
  for (int64_t r = 0; r < s.rows; ++r) {
    double mx = -kInf;
    bool nan = false;
    for (int64_t c = 0; c < s.classes; ++c) {
      double v = k.x[size_t(r * s.classes + c)];
      nan = nan || std::isnan(v);
      mx = std::max(mx, v);
    }
    double sum = 0;
    if (mx > -kInf)
      for (int64_t c = 0; c < s.classes; ++c) sum += std::exp(k.x[size_t(r * s.classes + c)] - mx);
    double block = nan ? std::nan("") : mx + std::log(sum);
    e.lse.push_back(logAddExp(k.lse[size_t(r)], block));
    int64_t t = k.targets[size_t(r)] - s.begin;
    e.targetLogit.push_back(t >= 0 && t < s.classes ? k.x[size_t(r * s.classes + t)] : double(kUnset));
  }
  return e;
}

// Equal (infinities and NaN included), or within tol relative to 1 + |want|.
bool close(double got, double want, double tol) {
  if (std::isnan(want) || std::isinf(want)) return std::isnan(want) ? std::isnan(got) : got == want;
  return std::abs(got - want) <= tol * (1 + std::abs(want));
}

void checkForward(Case& k) {
  const Expected e = expectedForward(k);
  REQUIRE(xtrap::cuda::nllBlockForward(k.block(), k.lse.data(), k.targetLogit.data(), nullptr) == cudaSuccess);
  for (int64_t r = 0; r < k.shape.rows; ++r) {
    INFO("row " << r);
    CHECK(close(k.lse[size_t(r)], e.lse[size_t(r)], 2e-6));
    CHECK(close(k.targetLogit[size_t(r)], e.targetLogit[size_t(r)], 1e-6));
  }
  CHECK(k.lse.guardIntact());
  CHECK(k.targetLogit.guardIntact());
}

// Runs the backward from the lse the forward left, against the formula in double.
void checkGradient(Case& k) {
  const Shape& s = k.shape;
  Buffer<bf16> grad(size_t(s.rows * s.classes));
  REQUIRE(xtrap::cuda::nllBlockGradient(k.block(), k.lse.data(), k.gradNll.data(), grad.data(), nullptr) ==
          cudaSuccess);
  double worst = 0;
  for (int64_t r = 0; r < s.rows; ++r)
    for (int64_t c = 0; c < s.classes; ++c) {
      const double onehot = k.targets[size_t(r)] - s.begin == c ? 1.0 : 0.0;
      const double want =
          (std::exp(k.x[size_t(r * s.classes + c)] - double(k.lse[size_t(r)])) - onehot) * k.gradNll[size_t(r)];
      const double got = __bfloat162float(grad[size_t(r * s.classes + c)]);
      // One bf16 rounding of the result (8 significant bits), and float32's exp before it.
      worst = std::max(worst, std::abs(got - want) / (std::abs(want) + 1e-30));
      if (std::abs(got - want) > 4e-3 * std::abs(want) + 1e-30)
        FAIL("row " << r << " class " << c << ": " << got << " vs " << want);
    }
  INFO("worst relative difference " << worst);
  CHECK(worst <= 4e-3);
  CHECK(grad.guardIntact());
}

}  // namespace

TEST_CASE("linearNll's CUDA passes (CPU emulation): log-sum-exp, target logits and gradients", "[cuda_emulation]") {
  const std::vector<Shape> shapes = {
      {13, 64, 64, 128, 1000, false},  // 16-byte path, rows past the last warp's
      {9, 600, 608, 0, 600, true},     // wider than one warp's pass (256 classes), stride > n
      {11, 37, 40, 50, 200, true},     // 16-byte forward with a tail; gradient one at a time
      {10, 45, 45, 3, 100, false},     // unaligned rows: one at a time throughout
      {1, 1, 1, 0, 1, true},           // one class
  };
  for (const Shape& s : shapes) {
    INFO("rows " << s.rows << " classes " << s.classes << " stride " << s.stride << " begin " << s.begin);
    Case k(s);
    checkForward(k);
    checkGradient(k);
  }
}

TEST_CASE("linearNll's CUDA passes (CPU emulation): a NaN row, a row of -inf, empty blocks", "[cuda_emulation]") {
  Case k({12, 80, 80, 0, 80, false});
  k.setRow(3, std::numeric_limits<float>::quiet_NaN());
  k.setRow(5, -std::numeric_limits<float>::infinity());
  const float before5 = k.lse[5];
  checkForward(k);
  CHECK(std::isnan(k.lse[3]));
  CHECK(k.lse[5] == before5);  // exp(-inf) adds nothing
  for (int64_t r : {2, 4, 6}) CHECK(std::isfinite(k.lse[size_t(r)]));

  // No rows or no classes: nothing launched, nothing written.
  xtrap::cuda::NllBlock empty = k.block();
  empty.rows = 0;
  CHECK(xtrap::cuda::nllBlockForward(empty, k.lse.data(), k.targetLogit.data(), nullptr) == cudaSuccess);
  empty = k.block();
  empty.stride = empty.classes - 1;
  CHECK(xtrap::cuda::nllBlockForward(empty, k.lse.data(), k.targetLogit.data(), nullptr) == cudaErrorInvalidValue);
}

TEST_CASE("linearNll's CUDA passes (CPU emulation): the same bits under both schedules", "[cuda_emulation]") {
  auto run = [](cuda_emulation::Schedule schedule) {
    cuda_emulation::setSchedule(schedule);
    Case k({17, 300, 304, 10, 400, true});
    REQUIRE(xtrap::cuda::nllBlockForward(k.block(), k.lse.data(), k.targetLogit.data(), nullptr) == cudaSuccess);
    std::vector<float> out(k.lse.data(), k.lse.data() + 17);
    cuda_emulation::setSchedule(cuda_emulation::Schedule::Ascending);
    return out;
  };
  CHECK(run(cuda_emulation::Schedule::Ascending) == run(cuda_emulation::Schedule::Descending));
}
