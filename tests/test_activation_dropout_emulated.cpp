// The activation with dropout (activation_dropout.cu) run on the CPU through tests/cuda_emulation.
// Checked against activation_dropout.cuh's contract written out again here in double, with the
// mask of dropout_reference.h:
//   GELU:  x Phi(x),  Phi(x) = (1 + erf(x / sqrt 2)) / 2,  d/dx = Phi(x) + x exp(-x^2/2) / sqrt(2 pi)
//   tanh:  x (1 + tanh(u)) / 2,  u = sqrt(2/pi) (x + 0.044715 x^3),
//          d/dx = (1 + tanh u) / 2 + x (1 - tanh^2 u) sqrt(2/pi) (1 + 3 0.044715 x^2) / 2
//   ReLU:  max(x, 0) (NaN stays NaN), d/dx = [x > 0] (NaN passes the gradient)
//   out = act(h) * factor,  dH = dOut * factor * act'(h)
// bf16 and float32; n a multiple of 8 (16-byte chunks) and not (a tail, and one element at a time
// where unaligned); dropout 0 and 0.4, the mask the reference's; NaN propagation.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "cuda_emulation.h"
#include "device_buffer.h"
#include "dropout_reference.h"
#include "model/activation_dropout.cuh"

using cuda_emulation::Buffer;
using xtrap::cuda::ActivationKind;
using bf16 = __nv_bfloat16;

namespace {

constexpr uint64_t kSeed = 977, kOffset = 12;
const double kPi = std::acos(-1.0);

double act(ActivationKind kind, double x) {
  if (kind == ActivationKind::Relu) return std::isnan(x) ? x : std::max(x, 0.0);
  if (kind == ActivationKind::GeluTanh)
    return 0.5 * x * (1 + std::tanh(std::sqrt(2 / kPi) * (x + 0.044715 * x * x * x)));
  return x * 0.5 * (1 + std::erf(x / std::sqrt(2.0)));
}

double derivative(ActivationKind kind, double x) {
  if (kind == ActivationKind::Relu) return x > 0 || std::isnan(x) ? 1 : 0;
  if (kind == ActivationKind::GeluTanh) {
    const double t = std::tanh(std::sqrt(2 / kPi) * (x + 0.044715 * x * x * x));
    return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * std::sqrt(2 / kPi) * (1 + 3 * 0.044715 * x * x);
  }
  return 0.5 * (1 + std::erf(x / std::sqrt(2.0))) + x * std::exp(-0.5 * x * x) / std::sqrt(2 * kPi);
}

// n values stored as bf16 or float32, from `offset` floats into the buffer (unaligned when odd).
struct Values {
  Buffer<float> storage;
  bool halves;  // bf16, else float32
  size_t offset;
  Values(size_t n, bool isBf16, size_t off) : storage(n + off), halves(isBf16), offset(off) {}
  void* data() {
    return halves ? static_cast<void*>(reinterpret_cast<bf16*>(storage.data()) + offset)
                  : static_cast<void*>(storage.data() + offset);
  }
  float get(size_t i) const {
    return halves ? __bfloat162float(reinterpret_cast<const bf16*>(storage.data())[offset + i]) : storage[offset + i];
  }
  void set(size_t i, float v) {
    if (halves)
      reinterpret_cast<bf16*>(storage.data())[offset + i] = __float2bfloat16(v);
    else
      storage[offset + i] = v;
  }
};

bool close(double got, double want, double tol) {
  if (std::isnan(want)) return std::isnan(got);
  return std::abs(got - want) <= tol * (1 + std::abs(want));
}

void checkCase(ActivationKind kind, size_t n, bool bf16, double p, size_t offset, bool withNaN) {
  INFO("kind " << int(kind) << " n " << n << " bf16 " << bf16 << " p " << p << " offset " << offset);
  Values h(n, bf16, offset), out(n, bf16, offset), dOut(n, bf16, offset), dH(n, bf16, offset);
  Buffer<int64_t> resolved(2);
  std::mt19937 gen(uint32_t(n + 7 * offset));
  std::normal_distribution<float> normal(0.f, 2.f);
  for (size_t i = 0; i < n; ++i) h.set(i, normal(gen)), dOut.set(i, normal(gen));
  if (withNaN) h.set(n / 2, std::numeric_limits<float>::quiet_NaN());
  xtrap::cuda::ActivationDropoutArgs a;
  a.n = int64_t(n), a.kind = kind, a.bf16 = bf16;
  a.h = h.data(), a.out = out.data(), a.dOut = dOut.data(), a.dH = dH.data();
  a.dropout.threshold = p > 0 ? uint32_t(p * 4294967296.0) : 0;
  a.dropout.scale = float(1.0 / (1.0 - p));
  a.dropout.rng.seed = kSeed, a.dropout.rng.offset = kOffset;
  a.dropout.resolved = resolved.data();
  REQUIRE(xtrap::cuda::activationDropoutForward(a, nullptr) == cudaSuccess);
  if (p > 0) CHECK((resolved[0] == int64_t(kSeed) && resolved[1] == int64_t(kOffset)));
  // The backward as the glue runs it: the rng read back from what the forward resolved.
  a.dropout.rng = {};
  a.dropout.rng.captured = true, a.dropout.rng.seedPtr = resolved.data(), a.dropout.rng.offsetPtr = resolved.data() + 1;
  a.dropout.resolved = nullptr;
  if (p == 0) a.dropout.rng.seedPtr = a.dropout.rng.offsetPtr = nullptr;  // p = 0 reads no state
  REQUIRE(xtrap::cuda::activationDropoutBackward(a, nullptr) == cudaSuccess);
  const double tol = bf16 ? 4e-3 : 2e-6;
  const uint64_t key = dropout_reference::key(kSeed, kOffset);
  int outBad = 0, gradBad = 0, dropped = 0;
  for (size_t i = 0; i < n; ++i) {
    const double f = dropout_reference::factor(key, i, p), x = h.get(i);
    dropped += f == 0;
    const double spread = std::isnan(x) ? 0 : x * x;
    // float32's erf, tanh and exp: a few units of 1e-7 relative to the terms.
    if (!close(out.get(i), act(kind, x) * f, tol + 1e-6 * std::sqrt(spread))) ++outBad;
    if (!close(dH.get(i), dOut.get(i) * f * derivative(kind, x), tol + 1e-6 * (1 + spread))) ++gradBad;
  }
  CHECK(outBad == 0);
  CHECK(gradBad == 0);
  if (p == 0) CHECK(dropped == 0);
  if (p > 0) CHECK(std::abs(double(dropped) / double(n) - p) < 0.05);
  if (withNaN) {
    CHECK(std::isnan(out.get(n / 2)));  // NaN times dropout's 0 is NaN
    CHECK(std::isnan(dH.get(n / 2)) == (kind != ActivationKind::Relu));
  }
  for (Values* v : {&h, &out, &dOut, &dH}) CHECK(v->storage.guardIntact());
}

}  // namespace

TEST_CASE("activation + dropout's CUDA kernels (CPU emulation): every activation against the formulas",
          "[cuda_emulation]") {
  for (ActivationKind kind : {ActivationKind::Gelu, ActivationKind::GeluTanh, ActivationKind::Relu})
    for (bool bf16 : {true, false}) {
      checkCase(kind, 4096 + 8, bf16, 0.0, 0, false);  // 16-byte chunks, a block and a bit
      checkCase(kind, 3001, bf16, 0.4, 0, false);      // a tail of 1
      checkCase(kind, 640, bf16, 0.4, 1, true);        // unaligned: one at a time; a NaN
    }
}

TEST_CASE("activation + dropout's CUDA kernels (CPU emulation): the same bits under both schedules",
          "[cuda_emulation]") {
  auto run = [](cuda_emulation::Schedule schedule) {
    cuda_emulation::setSchedule(schedule);
    const size_t n = 999;
    Buffer<float> h(n), out(n);
    for (size_t i = 0; i < n; ++i) h[i] = float(i % 17) - 8.f;
    xtrap::cuda::ActivationDropoutArgs a;
    a.n = int64_t(n), a.h = h.data(), a.out = out.data();
    a.dropout.threshold = 1u << 30, a.dropout.scale = 4.f / 3.f;
    REQUIRE(xtrap::cuda::activationDropoutForward(a, nullptr) == cudaSuccess);
    cuda_emulation::setSchedule(cuda_emulation::Schedule::Ascending);
    return std::vector<float>(out.data(), out.data() + n);
  };
  CHECK(run(cuda_emulation::Schedule::Ascending) == run(cuda_emulation::Schedule::Descending));
}
