// The activation with dropout on CUDA (activation_dropout.cuh).
//
// A thread takes 8 consecutive elements: one 16-byte load of bf16 (two of float32) where the
// tensors are 16-byte aligned and n a multiple of 8, else one element at a time; the activation
// and its derivative in float32 with LibTorch's formulas (GeluCUDAKernelImpl, GeluBackward);
// one store. Memory-bound by design.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "cuda/element_chunks.cuh"
#include "cuda/launch_1d.cuh"
#include "model/activation_dropout.cuh"
#include "model/counter_dropout.cuh"

namespace xtrap::cuda {
namespace {

using bf16 = __nv_bfloat16;

constexpr int kThreads = 256;
constexpr float kSqrtHalf = 0.70710678118654752440f;       // 1 / sqrt(2)
constexpr float kNormalDensity = 0.39894228040143267794f;  // 1 / sqrt(2 pi)
constexpr float kTanhBeta = 0.79788456080286535588f;       // sqrt(2 / pi)
constexpr float kTanhKappa = 0.044715f;

__device__ __forceinline__ float activation(ActivationKind kind, float x) {
  if (kind == ActivationKind::Relu) return x > 0.f || x != x ? x : 0.f;
  if (kind == ActivationKind::GeluTanh) return 0.5f * x * (1.f + tanhf(kTanhBeta * (x + kTanhKappa * x * x * x)));
  return x * 0.5f * (1.f + erff(x * kSqrtHalf));
}

// d act / dx at x.
__device__ __forceinline__ float derivative(ActivationKind kind, float x) {
  if (kind == ActivationKind::Relu) return x <= 0.f ? 0.f : 1.f;
  if (kind == ActivationKind::GeluTanh) {
    const float t = tanhf(kTanhBeta * (x + kTanhKappa * x * x * x));
    return 0.5f * (1.f + t) + 0.5f * x * (1.f - t * t) * kTanhBeta * (1.f + 3.f * kTanhKappa * x * x);
  }
  return 0.5f * (1.f + erff(x * kSqrtHalf)) + x * kNormalDensity * expf(-0.5f * x * x);
}

// Element range [i0, i0 + n) of this thread, n <= 8; whole: one aligned chunk of 8.
struct Chunk {
  int64_t i0;
  int n;
  bool whole;
};
__device__ __forceinline__ bool chunkOf(int64_t total, bool vector, Chunk& c) {
  c.i0 = (int64_t(blockIdx.x) * kThreads + threadIdx.x) * kChunk;
  if (c.i0 >= total) return false;
  c.n = total - c.i0 < kChunk ? int(total - c.i0) : kChunk;
  c.whole = vector && c.n == kChunk;
  return true;
}

template <typename T>
__global__ void __launch_bounds__(kThreads) forwardKernel(const ActivationDropoutArgs a) {
  const DropoutKey key = dropoutKeyOf(a.dropout);
  Chunk c;
  if (!chunkOf(a.n, a.n % kChunk == 0 && aligned16(a.h) && aligned16(a.out), c)) return;
  float v[kChunk];
  loadChunk(static_cast<const T*>(a.h) + c.i0, v, c.n, c.whole);
  for (int k = 0; k < c.n; ++k) v[k] = activation(a.kind, v[k]) * dropFactor(a.dropout, key, uint32_t(c.i0 + k));
  storeChunk(static_cast<T*>(a.out) + c.i0, v, c.n, c.whole);
}

template <typename T>
__global__ void __launch_bounds__(kThreads) backwardKernel(const ActivationDropoutArgs a) {
  const DropoutKey key = dropoutKeyOf(a.dropout);
  Chunk c;
  if (!chunkOf(a.n, a.n % kChunk == 0 && aligned16(a.h) && aligned16(a.dOut) && aligned16(a.dH), c)) return;
  float h[kChunk], g[kChunk];
  loadChunk(static_cast<const T*>(a.h) + c.i0, h, c.n, c.whole);
  loadChunk(static_cast<const T*>(a.dOut) + c.i0, g, c.n, c.whole);
  for (int k = 0; k < c.n; ++k) g[k] = g[k] * dropFactor(a.dropout, key, uint32_t(c.i0 + k)) * derivative(a.kind, h[k]);
  storeChunk(static_cast<T*>(a.dH) + c.i0, g, c.n, c.whole);
}

int64_t blocksOf(int64_t n) { return (n + int64_t(kThreads) * kChunk - 1) / (int64_t(kThreads) * kChunk); }

bool badArgs(const ActivationDropoutArgs& a) { return a.n < 0 || a.n > int64_t(0xffffffff) || !a.h; }

}  // namespace

cudaError_t activationDropoutForward(const ActivationDropoutArgs& a, cudaStream_t stream) {
  if (badArgs(a) || !a.out) return cudaErrorInvalidValue;
  return a.bf16 ? launch1d(forwardKernel<bf16>, blocksOf(a.n), kThreads, stream, a)
                : launch1d(forwardKernel<float>, blocksOf(a.n), kThreads, stream, a);
}

cudaError_t activationDropoutBackward(const ActivationDropoutArgs& a, cudaStream_t stream) {
  if (badArgs(a) || !a.dOut || !a.dH) return cudaErrorInvalidValue;
  return a.bf16 ? launch1d(backwardKernel<bf16>, blocksOf(a.n), kThreads, stream, a)
                : launch1d(backwardKernel<float>, blocksOf(a.n), kThreads, stream, a);
}

}  // namespace xtrap::cuda
