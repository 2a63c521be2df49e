// linearNll's per-block passes on CUDA (linear_nll.cuh).
//
// One warp per row of the block's (N, n) bf16 logits, 8 rows per thread block: the lanes walk
// the row's classes 8 at a time with 16-byte loads where the row is 16-byte aligned (else one at a
// time), so a pass reads each bf16 logit once and keeps nothing but a running max and sum per
// lane. Memory-bound by design: the matmuls around it are the arithmetic.
//
// Forward: each lane keeps (m, s), its classes' max and sum of exp(x - m), a chunk of 8 rescaling
// s once; the warp merges the 32 pairs in a fixed butterfly order (the same result run to run),
// and lane 0 folds the row's log-sum-exp into the running one and reads the target's logit.
// Backward: the same walk writes (exp(x - lse) - onehot) * dNll, rounded to bf16 once.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <utility>

#include "model/linear_nll.cuh"

namespace xtrap::cuda {
namespace {

using bf16 = __nv_bfloat16;

constexpr int kWarps = 8;  // rows per thread block
constexpr int kThreads = 32 * kWarps;
constexpr int kVector = 8;  // bf16 classes per 16-byte load

__device__ __forceinline__ float biasOf(const NllBlock& blk, int64_t c) { return blk.bias ? blk.bias[c] : 0.f; }

__device__ __forceinline__ bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// Calls f(c, x) over this lane's share of the row: x[k] = logit[c + k] + bias[c + k] in float32,
// for k < K, with K = 8 (one 16-byte load; where `vector`, for the classes below the last multiple
// of 8) or K = 1 (the rest). Lanes take consecutive chunks, so a warp's loads are contiguous.
template <typename F>
__device__ __forceinline__ void forEachChunk(const NllBlock& blk, const bf16* row, bool vector, int lane, F f) {
  int64_t tail = 0;
  if (vector) {
    tail = blk.classes / kVector * kVector;
    for (int64_t c = int64_t(lane) * kVector; c < tail; c += 32 * kVector) {
      alignas(16) bf16 v[kVector];
      *reinterpret_cast<uint4*>(v) = *reinterpret_cast<const uint4*>(row + c);
      float x[kVector];
#pragma unroll
      for (int k = 0; k < kVector; ++k) x[k] = __bfloat162float(v[k]) + biasOf(blk, c + k);
      f(c, x);
    }
  }
  for (int64_t c = tail + lane; c < blk.classes; c += 32) {
    const float x[1] = {__bfloat162float(row[c]) + biasOf(blk, c)};
    f(c, x);
  }
}

// (m, s) <- the pair of the union of two sets of logits. Both empty (m = -inf): s stays 0, or NaN
// if either held a NaN.
__device__ __forceinline__ void merge(float& m, float& s, float m2, float s2) {
  const float mx = fmaxf(m, m2);
  if (mx == -INFINITY) {
    s += s2;
    return;
  }
  s = s * expf(m - mx) + s2 * expf(m2 - mx);
  m = mx;
}

// torch.logaddexp's float32 formula.
__device__ __forceinline__ float logAddExp(float a, float b) {
  if (a != a || b != b) return a + b;  // NaN
  const float mx = fmaxf(a, b);
  if (mx == -INFINITY || mx == INFINITY) return mx;
  return mx + log1pf(expf(fminf(a, b) - mx));
}

// The warp of row r, or r >= N (the whole warp returns).
__device__ __forceinline__ int64_t warpRow() { return int64_t(blockIdx.x) * kWarps + threadIdx.x / 32; }

__global__ void __launch_bounds__(kThreads) forwardKernel(const NllBlock blk, float* lse, float* targetLogit) {
  const int64_t r = warpRow();
  if (r >= blk.rows) return;
  const int lane = threadIdx.x % 32;
  const bf16* row = static_cast<const bf16*>(blk.logits) + r * blk.stride;
  const bool vector = aligned16(blk.logits) && blk.stride % kVector == 0;
  float m = -INFINITY, s = 0.f;  // this lane's classes: max, and sum of exp(x - m)
  forEachChunk(blk, row, vector, lane, [&](int64_t, const auto& x) {
    constexpr int K = sizeof(x) / sizeof(float);
    float chunkMax = x[0];
#pragma unroll
    for (int k = 1; k < K; ++k) chunkMax = fmaxf(chunkMax, x[k]);
    if (chunkMax > m) {
      s *= expf(m - chunkMax);
      m = chunkMax;
    }
    // Nothing finite yet (m = -inf): every x so far is -inf (adds exp(-inf) = 0) or NaN (adds NaN).
    const float base = m == -INFINITY ? 0.f : m;
#pragma unroll
    for (int k = 0; k < K; ++k) s += expf(x[k] - base);
  });
  for (int offset = 16; offset > 0; offset >>= 1) {
    const float m2 = __shfl_xor_sync(0xffffffffu, m, offset), s2 = __shfl_xor_sync(0xffffffffu, s, offset);
    merge(m, s, m2, s2);
  }
  if (lane != 0) return;
  lse[r] = logAddExp(lse[r], m + logf(s));
  const int64_t t = blk.targets[r] - blk.begin;
  if (t >= 0 && t < blk.classes) targetLogit[r] = __bfloat162float(row[t]) + biasOf(blk, t);
}

__global__ void __launch_bounds__(kThreads)
    gradientKernel(const NllBlock blk, const float* lse, const float* gradNll, bf16* grad) {
  const int64_t r = warpRow();
  if (r >= blk.rows) return;
  const int lane = threadIdx.x % 32;
  const bf16* row = static_cast<const bf16*>(blk.logits) + r * blk.stride;
  bf16* out = grad + r * blk.classes;
  // 16-byte stores too: every output row aligned.
  const bool vector =
      aligned16(blk.logits) && blk.stride % kVector == 0 && aligned16(grad) && blk.classes % kVector == 0;
  const float rowLse = lse[r], rowGrad = gradNll[r];
  const int64_t t = blk.targets[r] - blk.begin;
  forEachChunk(blk, row, vector, lane, [&](int64_t c, const auto& x) {
    constexpr int K = sizeof(x) / sizeof(float);
    alignas(16) bf16 g[K];
#pragma unroll
    for (int k = 0; k < K; ++k) g[k] = __float2bfloat16((expf(x[k] - rowLse) - (c + k == t ? 1.f : 0.f)) * rowGrad);
    if constexpr (K == kVector) {
      *reinterpret_cast<uint4*>(out + c) = *reinterpret_cast<const uint4*>(g);
    } else {
      out[c] = g[0];
    }
  });
}

// One warp per row. Through cudaLaunchKernelEx rather than <<<...>>>, so that this file also
// compiles as plain C++ (tests/cuda_emulation runs its kernels on the CPU).
template <typename... Params, typename... Args>
cudaError_t launchRows(void (*kernel)(Params...), const NllBlock& blk, cudaStream_t stream, Args&&... args) {
  if (blk.rows <= 0 || blk.classes <= 0) return cudaSuccess;
  if (blk.stride < blk.classes || !blk.logits || !blk.targets) return cudaErrorInvalidValue;
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(unsigned((blk.rows + kWarps - 1) / kWarps));
  config.blockDim = dim3(kThreads);
  config.stream = stream;
  return cudaLaunchKernelEx(&config, kernel, blk, std::forward<Args>(args)...);
}

}  // namespace

cudaError_t nllBlockForward(const NllBlock& block, float* lse, float* targetLogit, cudaStream_t stream) {
  return launchRows(forwardKernel, block, stream, lse, targetLogit);
}

cudaError_t nllBlockGradient(const NllBlock& block, const float* lse, const float* gradNll, void* grad,
                             cudaStream_t stream) {
  return launchRows(gradientKernel, block, stream, lse, gradNll, static_cast<bf16*>(grad));
}

}  // namespace xtrap::cuda
