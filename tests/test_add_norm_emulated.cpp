// The residual add with dropout and LayerNorm (add_norm.cu) run on the CPU through
// tests/cuda_emulation: the kernels' own code, lanes and shuffles. Checked against add_norm.cuh's
// contract written out again here, with the mask of dropout_reference.h:
//   out = x + y * factor (float32, bit for bit: one product and one sum, as x + fastDropout(y)),
//   normed = (out - mean) / sqrt(var + eps) * w + b in double (var biased),
//   dX = dOut + (g - mean(g) - xhat mean(g xhat)) / sqrt(var + eps), g = dNormed w, in double,
//   dY = dX * factor, dW = sum_r dNormed xhat, dB = sum_r dNormed.
// Shapes cover the 16-byte path (C a multiple of 8), rows wider than a warp's pass (C > 256),
// C not a multiple of 8 (one element at a time), rows past the last warp's and more than one block
// of the column sums (N > 64); y and normed in bf16 and float32; dropout 0 and 0.3 (the mask the
// reference's for the forward's seed and offset, in value and in captured form); a NaN in y (its
// row NaN, no other row touched); the same bits under both thread schedules.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "cuda_emulation.h"
#include "device_buffer.h"
#include "dropout_reference.h"
#include "model/add_norm.cuh"

using cuda_emulation::Buffer;
using bf16 = __nv_bfloat16;

namespace {

struct Shape {
  int64_t rows, cols;
  bool yBf16, normedBf16;
  double p;
};

constexpr uint64_t kSeed = 0x0123456789abcdefull, kOffset = 48;
constexpr float kEps = 1e-5f;

// A float stored as bf16 or float32 in one buffer of floats' room.
struct Mixed {
  Buffer<float> storage;
  bool halves;  // bf16, else float32
  Mixed(size_t n, bool isBf16) : storage(n), halves(isBf16) {}
  void* data() { return storage.data(); }
  float get(size_t i) const {
    return halves ? __bfloat162float(reinterpret_cast<const bf16*>(storage.data())[i]) : storage[i];
  }
  void set(size_t i, float v) {
    if (halves)
      reinterpret_cast<bf16*>(storage.data())[i] = __float2bfloat16(v);
    else
      storage[i] = v;
  }
};

struct Case {
  Shape s;
  size_t n;
  Buffer<float> x, weight, bias, out, mean, rstd, dOut, dX, dWeight, dBias, partial;
  Mixed y, normed, dNormed, dY;
  Buffer<int64_t> resolved;

  explicit Case(const Shape& shape)
      : s(shape),
        n(size_t(shape.rows * shape.cols)),
        x(n),
        weight(size_t(shape.cols)),
        bias(size_t(shape.cols)),
        out(n),
        mean(size_t(shape.rows)),
        rstd(size_t(shape.rows)),
        dOut(n),
        dX(n),
        dWeight(size_t(shape.cols)),
        dBias(size_t(shape.cols)),
        partial(size_t(xtrap::cuda::addNormPartialFloats(shape.rows, shape.cols))),
        y(n, shape.yBf16),
        normed(n, shape.normedBf16),
        dNormed(n, shape.normedBf16),
        dY(n, shape.yBf16),
        resolved(2) {
    std::mt19937 gen(uint32_t(s.rows * 1000 + s.cols));
    std::normal_distribution<float> normal(0.f, 1.f);
    for (size_t i = 0; i < n; ++i) {
      x[i] = 2.f * normal(gen) + 0.5f;
      y.set(i, normal(gen));
      dOut[i] = normal(gen);
      dNormed.set(i, normal(gen));
    }
    for (int64_t c = 0; c < s.cols; ++c) weight[size_t(c)] = 1.f + 0.3f * normal(gen), bias[size_t(c)] = normal(gen);
  }

  xtrap::cuda::AddNormArgs args() {
    xtrap::cuda::AddNormArgs a;
    a.rows = s.rows, a.cols = s.cols;
    a.x = x.data(), a.y = y.data(), a.yBf16 = s.yBf16;
    a.weight = weight.data(), a.bias = bias.data(), a.eps = kEps;
    a.dropout.threshold = s.p > 0 ? uint32_t(s.p * 4294967296.0) : 0;
    a.dropout.scale = float(1.0 / (1.0 - s.p));
    a.dropout.rng.seed = kSeed, a.dropout.rng.offset = kOffset;
    a.dropout.resolved = resolved.data();
    a.out = out.data(), a.normed = normed.data(), a.normedBf16 = s.normedBf16;
    a.mean = mean.data(), a.rstd = rstd.data();
    return a;
  }

  // The backward's arguments: the forward's, its dropout read back from `resolved` (captured form).
  xtrap::cuda::AddNormBackwardArgs backwardArgs() {
    xtrap::cuda::AddNormBackwardArgs a;
    a.forward = args();
    a.forward.dropout.rng = {};
    a.forward.dropout.rng.captured = true;
    a.forward.dropout.rng.seedPtr = resolved.data(), a.forward.dropout.rng.offsetPtr = resolved.data() + 1;
    a.forward.dropout.resolved = nullptr;
    a.dOut = dOut.data(), a.dNormed = dNormed.data();
    a.dX = dX.data(), a.dY = dY.data(), a.dWeight = dWeight.data(), a.dBias = dBias.data();
    a.partial = partial.data();
    return a;
  }

  float factor(size_t i) const { return dropout_reference::factor(dropout_reference::key(kSeed, kOffset), i, s.p); }
};

// Within tol of want relative to 1 + |want|; NaN where want is.
bool close(double got, double want, double tol) {
  if (std::isnan(want)) return std::isnan(got);
  return std::abs(got - want) <= tol * (1 + std::abs(want));
}

void checkCase(Case& k) {
  const Shape& s = k.s;
  REQUIRE(xtrap::cuda::addNormForward(k.args(), nullptr) == cudaSuccess);
  if (s.p > 0) CHECK((k.resolved[0] == int64_t(kSeed) && k.resolved[1] == int64_t(kOffset)));
  const double normedTol = s.normedBf16 ? 4e-3 : 2e-5;
  int outMismatches = 0, normedMismatches = 0, dropped = 0;
  std::vector<double> xhat(k.n), inv(size_t(s.rows));
  for (int64_t r = 0; r < s.rows; ++r) {
    double sum = 0, squares = 0;
    for (int64_t c = 0; c < s.cols; ++c) {
      const size_t i = size_t(r * s.cols + c);
      volatile float product = k.y.get(i) * k.factor(i);  // one rounding each, as fastDropout's
      volatile float want = k.x[i] + product;
      if (k.out[i] != want) ++outMismatches;
      dropped += k.factor(i) == 0.f;
      sum += want;
    }
    const double mean = sum / double(s.cols);
    for (int64_t c = 0; c < s.cols; ++c) squares += std::pow(k.out[size_t(r * s.cols + c)] - mean, 2);
    inv[size_t(r)] = 1 / std::sqrt(squares / double(s.cols) + kEps);
    CHECK(close(k.mean[size_t(r)], mean, 1e-5));
    CHECK(close(k.rstd[size_t(r)], inv[size_t(r)], 1e-5));
    for (int64_t c = 0; c < s.cols; ++c) {
      const size_t i = size_t(r * s.cols + c);
      xhat[i] = (k.out[i] - mean) * inv[size_t(r)];
      const double want = xhat[i] * k.weight[size_t(c)] + k.bias[size_t(c)];
      if (!close(k.normed.get(i), want, normedTol)) ++normedMismatches;
    }
  }
  CHECK(outMismatches == 0);
  CHECK(normedMismatches == 0);
  if (s.p == 0) CHECK(dropped == 0);
  if (s.p > 0 && k.n >= 1000) CHECK(std::abs(double(dropped) / double(k.n) - s.p) < 0.05);

  REQUIRE(xtrap::cuda::addNormBackward(k.backwardArgs(), nullptr) == cudaSuccess);
  const double dYTol = s.yBf16 ? 4e-3 : 2e-5;
  int dxMismatches = 0, dyMismatches = 0;
  std::vector<double> dW(size_t(s.cols)), dB(size_t(s.cols));
  for (int64_t r = 0; r < s.rows; ++r) {
    double meanG = 0, meanGX = 0;
    for (int64_t c = 0; c < s.cols; ++c) {
      const size_t i = size_t(r * s.cols + c);
      const double g = double(k.dNormed.get(i)) * k.weight[size_t(c)];
      meanG += g / double(s.cols), meanGX += g * xhat[i] / double(s.cols);
      dW[size_t(c)] += k.dNormed.get(i) * xhat[i], dB[size_t(c)] += k.dNormed.get(i);
    }
    for (int64_t c = 0; c < s.cols; ++c) {
      const size_t i = size_t(r * s.cols + c);
      const double g = double(k.dNormed.get(i)) * k.weight[size_t(c)];
      const double dx = k.dOut[i] + inv[size_t(r)] * (g - meanG - xhat[i] * meanGX);
      if (!close(k.dX[i], dx, 5e-5 * (1 + inv[size_t(r)]))) ++dxMismatches;
      if (!close(k.dY.get(i), dx * k.factor(i), dYTol * (1 + inv[size_t(r)]))) ++dyMismatches;
    }
  }
  CHECK(dxMismatches == 0);
  CHECK(dyMismatches == 0);
  for (int64_t c = 0; c < s.cols; ++c) {
    CHECK(close(k.dWeight[size_t(c)], dW[size_t(c)], 1e-5 * std::sqrt(double(s.rows))));
    CHECK(close(k.dBias[size_t(c)], dB[size_t(c)], 1e-5 * std::sqrt(double(s.rows))));
  }
  for (const Buffer<float>* b : {&k.out, &k.mean, &k.rstd, &k.dX, &k.dWeight, &k.dBias, &k.partial})
    CHECK(b->guardIntact());
  CHECK(k.normed.storage.guardIntact());
  CHECK(k.dY.storage.guardIntact());
}

}  // namespace

TEST_CASE("add & norm's CUDA kernels (CPU emulation): forward and backward against the formulas", "[cuda_emulation]") {
  const std::vector<Shape> shapes = {
      {13, 64, true, true, 0.0},     // 16-byte path, bf16 branch and output, rows past the last warp's
      {5, 600, true, true, 0.3},     // wider than one warp's pass (256 columns), dropout
      {130, 24, false, false, 0.3},  // float32 throughout, three blocks of column sums
      {7, 37, true, false, 0.1},     // C not a multiple of 8: one element at a time
      {9, 512, false, true, 0.0},    // the model's width, float32 branch
      {1, 1, true, true, 0.0},       // one column: normed is the bias
  };
  for (const Shape& s : shapes) {
    INFO("rows " << s.rows << " cols " << s.cols << " y bf16 " << s.yBf16 << " normed bf16 " << s.normedBf16 << " p "
                 << s.p);
    Case k(s);
    checkCase(k);
  }
}

TEST_CASE("add & norm's CUDA kernels (CPU emulation): captured random state, NaN rows", "[cuda_emulation]") {
  // A captured state: the seed and offset read through pointers, the offset plus the graph's own.
  Case k({12, 40, true, true, 0.5});
  Buffer<int64_t> generator(2);
  generator[0] = int64_t(kSeed), generator[1] = int64_t(kOffset - 8);
  auto a = k.args();
  a.dropout.rng = {};
  a.dropout.rng.captured = true, a.dropout.rng.seedPtr = generator.data(),
  a.dropout.rng.offsetPtr = generator.data() + 1;
  a.dropout.rng.offsetIntragraph = 8;
  REQUIRE(xtrap::cuda::addNormForward(a, nullptr) == cudaSuccess);
  CHECK(k.resolved[1] == int64_t(kOffset));
  std::vector<float> captured(k.out.data(), k.out.data() + k.n);
  REQUIRE(xtrap::cuda::addNormForward(k.args(), nullptr) == cudaSuccess);
  CHECK(std::vector<float>(k.out.data(), k.out.data() + k.n) == captured);

  // A NaN in y: its row's out, normed, mean and rstd NaN, no other row touched.
  Case nan({12, 40, false, false, 0.0});
  nan.y.set(3 * 40 + 7, std::numeric_limits<float>::quiet_NaN());
  REQUIRE(xtrap::cuda::addNormForward(nan.args(), nullptr) == cudaSuccess);
  CHECK(std::isnan(nan.out[3 * 40 + 7]));
  CHECK(std::isnan(nan.mean[3]));
  for (int64_t c = 0; c < 40; ++c) CHECK(std::isnan(nan.normed.get(size_t(3 * 40 + c))));
  for (int64_t r : {2, 4}) {
    CHECK(std::isfinite(nan.mean[size_t(r)]));
    CHECK(std::isfinite(nan.normed.get(size_t(r * 40))));
  }

  // Bad arguments: no launch.
  auto bad = nan.args();
  bad.cols = 0;
  CHECK(xtrap::cuda::addNormForward(bad, nullptr) == cudaErrorInvalidValue);
}

TEST_CASE("add & norm's CUDA kernels (CPU emulation): the same bits under both schedules", "[cuda_emulation]") {
  auto run = [](cuda_emulation::Schedule schedule) {
    cuda_emulation::setSchedule(schedule);
    Case k({70, 300, true, true, 0.2});
    REQUIRE(xtrap::cuda::addNormForward(k.args(), nullptr) == cudaSuccess);
    REQUIRE(xtrap::cuda::addNormBackward(k.backwardArgs(), nullptr) == cudaSuccess);
    cuda_emulation::setSchedule(cuda_emulation::Schedule::Ascending);
    std::vector<float> result(k.mean.data(), k.mean.data() + 70);
    result.insert(result.end(), k.dX.data(), k.dX.data() + k.n);
    result.insert(result.end(), k.dWeight.data(), k.dWeight.data() + 300);
    return result;
  };
  CHECK(run(cuda_emulation::Schedule::Ascending) == run(cuda_emulation::Schedule::Descending));
}
