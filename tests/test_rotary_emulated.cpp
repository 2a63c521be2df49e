// The rotary kernel (rotary.cu) run on the CPU through tests/cuda_emulation: the kernel's own code,
// threads and 16-byte loads. Checked against rotary.cuh's contract written out again here, per pair
// p of a row, x1 = x[p], x2 = x[p + D/2] (bf16), c and s the tables' float32 values:
//   forward:    y1 = bf16((x1 c - x2 s) f),            y2 = bf16((x2 c + x1 s) f)
//   transposed: y1 = bf16(x1' c + x2' s),              y2 = bf16(x2' c - x1' s),  x' = x f
// each product and sum a float32 rounding of its own (bit for bit), and against the rotation in
// double (one bf16 rounding and a few float32 ones away). The transposed rotation undoes the
// forward one (R^T R = I). Inputs as the model has them: a strided view of one fused (B, T, 3, H, D)
// projection, and a contiguous tensor; rows past a block's threads; the attention factor.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "cuda_emulation.h"
#include "device_buffer.h"
#include "model/position/rotary.cuh"

using cuda_emulation::Buffer;
using xtrap::cuda::HeadsView;
using xtrap::cuda::RotaryArgs;
using bf16 = __nv_bfloat16;

namespace {

struct Shape {
  int B, H, T, D;
  bool fusedProjection;  // x is the q part of a (B, T, 3, H, D) buffer, else a contiguous (B, H, T, D)
  float factor;
};

float bf16Value(bf16 h) { return __bfloat162float(h); }

// The inputs of one case: x, its view, and (T, D/2) tables of angles t * 10000^(-2p/D) (any angles
// serve; these are rotary's).
struct Case {
  Shape s;
  Buffer<bf16> storage;
  Buffer<float> cos, sin;
  HeadsView view;

  explicit Case(const Shape& shape)
      : s(shape),
        storage(size_t(shape.B) * shape.T * (shape.fusedProjection ? 3 : 1) * shape.H * shape.D),
        cos(size_t(shape.T) * shape.D / 2),
        sin(size_t(shape.T) * shape.D / 2) {
    std::mt19937 gen(uint32_t(s.B * 1000 + s.T * 10 + s.D));
    std::normal_distribution<float> normal(0.f, 1.5f);
    const size_t n = size_t(s.B) * s.T * (s.fusedProjection ? 3 : 1) * s.H * s.D;
    for (size_t e = 0; e < n; ++e) storage[e] = __float2bfloat16(normal(gen));
    for (int t = 0; t < s.T; ++t)
      for (int p = 0; p < s.D / 2; ++p) {
        const double angle = t * std::pow(10000.0, -2.0 * p / s.D);
        cos[size_t(t) * s.D / 2 + p] = float(std::cos(angle));
        sin[size_t(t) * s.D / 2 + p] = float(std::sin(angle));
      }
    if (s.fusedProjection) {  // (B, T, 3, H, D): q of row t at t * 3HD, head h at h D
      const int64_t row = int64_t(3) * s.H * s.D;
      view = {storage.data(), int64_t(s.T) * row, s.D, row};
    } else {
      view = {storage.data(), int64_t(s.H) * s.T * s.D, int64_t(s.T) * s.D, s.D};
    }
  }

  bf16 at(const HeadsView& v, int b, int h, int t, int d) const {
    return static_cast<const bf16*>(v.data)[b * v.sb + h * v.sh + int64_t(t) * v.st + d];
  }

  RotaryArgs args(const HeadsView& x, bf16* out, bool transposed) const {
    RotaryArgs a;
    a.x = x, a.out = out;
    a.B = s.B, a.H = s.H, a.T = s.T, a.D = s.D;
    a.cos = cos.data(), a.sin = sin.data();
    a.factor = s.factor, a.transposed = transposed;
    return a;
  }
};

// rotary.cuh's contract for pair p at row t, from x1 and x2: the two outputs before bf16.
void contract(float x1, float x2, float c, float s, float factor, bool transposed, float& y1, float& y2) {
  volatile float v;  // each product and sum rounded to float32 on its own, whatever the compiler
  if (transposed) {
    v = x1 * factor, x1 = v;
    v = x2 * factor, x2 = v;
    float a, b;
    v = x1 * c, a = v;
    v = x2 * s, b = v;
    v = a + b, y1 = v;
    v = x2 * c, a = v;
    v = x1 * s, b = v;
    v = a - b, y2 = v;
    return;
  }
  float a, b;
  v = x1 * c, a = v;
  v = x2 * s, b = v;
  v = a - b, y1 = v;
  v = x2 * c, a = v;
  v = x1 * s, b = v;
  v = a + b, y2 = v;
  v = y1 * factor, y1 = v;
  v = y2 * factor, y2 = v;
}

// Runs the kernel on `x` and checks every output against the contract (bits) and the rotation
// in double; returns the output, (B, H, T, D) contiguous.
std::vector<float> checkRotation(const Case& k, const HeadsView& x, bool transposed) {
  const Shape& s = k.s;
  const size_t n = size_t(s.B) * s.H * s.T * s.D;
  Buffer<bf16> out(n);
  REQUIRE(xtrap::cuda::rotate(k.args(x, out.data(), transposed), nullptr) == cudaSuccess);
  std::vector<float> result(n);
  int mismatches = 0;
  double worst = 0;
  for (int b = 0; b < s.B; ++b)
    for (int h = 0; h < s.H; ++h)
      for (int t = 0; t < s.T; ++t)
        for (int p = 0; p < s.D / 2; ++p) {
          const float x1 = bf16Value(k.at(x, b, h, t, p)), x2 = bf16Value(k.at(x, b, h, t, p + s.D / 2));
          const float c = k.cos[size_t(t) * s.D / 2 + p], sn = k.sin[size_t(t) * s.D / 2 + p];
          float y1, y2;
          contract(x1, x2, c, sn, s.factor, transposed, y1, y2);
          const size_t o = ((size_t(b) * s.H + h) * s.T + t) * s.D + p;
          const float got1 = bf16Value(out[o]), got2 = bf16Value(out[o + s.D / 2]);
          if (got1 != bf16Value(__float2bfloat16(y1)) || got2 != bf16Value(__float2bfloat16(y2))) ++mismatches;
          // In double: the rotation by +angle (forward) or -angle (transposed), times the factor.
          const double sign = transposed ? -1.0 : 1.0, f = s.factor;
          const double want1 = (double(x1) * c - sign * double(x2) * sn) * f;
          const double want2 = (double(x2) * c + sign * double(x1) * sn) * f;
          const double scale = (std::abs(double(x1)) + std::abs(double(x2))) * std::abs(f);
          worst = std::max({worst, std::abs(got1 - want1) / (std::abs(want1) / 256 + scale * 1e-6),
                            std::abs(got2 - want2) / (std::abs(want2) / 256 + scale * 1e-6)});
          result[o] = got1, result[o + s.D / 2] = got2;
        }
  INFO("D " << s.D << (transposed ? " transposed" : " forward") << ": worst error in units of the tolerance " << worst);
  CHECK(mismatches == 0);
  CHECK(worst <= 1.0);  // half a bf16 unit (2^-9 relative), float32's roundings a few 1e-7 of the terms
  CHECK(out.guardIntact());
  return result;
}

}  // namespace

TEST_CASE("rotary's CUDA kernel (CPU emulation): forward and transposed rotation, bit for bit", "[cuda_emulation]") {
  const std::vector<Shape> shapes = {
      {2, 3, 5, 16, false, 1.f},    // one thread a row; 30 rows: a block's threads not all used
      {2, 4, 37, 64, true, 1.f},    // the fused projection's view, as the model's q and k
      {1, 2, 129, 128, true, 0.8f}  // D 128, an attention factor (YaRN's)
  };
  for (const Shape& s : shapes) {
    INFO("B " << s.B << " H " << s.H << " T " << s.T << " D " << s.D << " factor " << s.factor);
    Case k(s);
    const std::vector<float> forward = checkRotation(k, k.view, false);
    checkRotation(k, k.view, true);

    // R^T R = I: the transposed rotation of the forward's output is x f^2, within two bf16 roundings.
    const size_t n = forward.size();
    Buffer<bf16> rotated(n), back(n);
    for (size_t e = 0; e < n; ++e) rotated[e] = __float2bfloat16(forward[e]);
    const HeadsView rotatedView{rotated.data(), int64_t(s.H) * s.T * s.D, int64_t(s.T) * s.D, s.D};
    REQUIRE(xtrap::cuda::rotate(k.args(rotatedView, back.data(), true), nullptr) == cudaSuccess);
    double worst = 0;
    for (int b = 0; b < s.B; ++b)
      for (int h = 0; h < s.H; ++h)
        for (int t = 0; t < s.T; ++t)
          for (int d = 0; d < s.D; ++d) {
            const double want = double(bf16Value(k.at(k.view, b, h, t, d))) * s.factor * s.factor;
            const double got = bf16Value(back[((size_t(b) * s.H + h) * s.T + t) * s.D + d]);
            const double pairNorm = std::hypot(double(bf16Value(k.at(k.view, b, h, t, d % (s.D / 2)))),
                                               double(bf16Value(k.at(k.view, b, h, t, d % (s.D / 2) + s.D / 2))));
            worst = std::max(worst, std::abs(got - want) / (pairNorm * s.factor * s.factor));
          }
    INFO("R^T R: worst error relative to the pair's norm " << worst);
    CHECK(worst <= 3.0 / 256);  // two bf16 roundings of the rotated pair, one of the result
  }
}

TEST_CASE("rotary's CUDA kernel (CPU emulation): refuses a head dimension it cannot read in 16 bytes",
          "[cuda_emulation]") {
  Case k({1, 1, 3, 16, false, 1.f});
  Buffer<bf16> out(48);
  for (int D : {0, 8, 24, 40}) {
    RotaryArgs a = k.args(k.view, out.data(), false);
    a.D = D;
    INFO("D " << D);
    CHECK(xtrap::cuda::rotaryCheck(a) != nullptr);
    CHECK(xtrap::cuda::rotate(a, nullptr) == cudaErrorInvalidValue);
  }
  RotaryArgs empty = k.args(k.view, out.data(), false);
  empty.T = 0;
  CHECK(xtrap::cuda::rotate(empty, nullptr) == cudaErrorInvalidValue);
  CHECK(out.guardIntact());
}
