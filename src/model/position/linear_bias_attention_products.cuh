#pragma once
// The fused ALiBi-family attention kernels' tile products (linear_bias_attention.cu has the
// overview): mma.sync on a warp's 16 rows (warp_mma.cuh) and the warpgroup MMA on a block's 64
// (warpgroup_mma.cuh), each warp's accumulators in the same registers either way, and the
// conversions between their fragments.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/core_matrix_tile.h"
#include "cuda/warp_mma.cuh"
#include "cuda/warpgroup_mma.cuh"
#include "model/position/linear_bias_attention_layout.cuh"

namespace xtrap::cuda {
namespace {

// ---- warp tile products (warp_mma.cuh) ----

// Where this lane's elements of a warp's (16, N) fp32 fragments lie: element e of the 8-column
// fragment n is at row(e) of the warp's 16 rows and column(n, e) of the N.
struct FragmentLane {
  int g, t;  // lane / 4, lane % 4
  __device__ int row(int e) const { return g + 8 * (e >> 1); }
  __device__ int column(int n, int e) const { return 8 * n + 2 * t + (e & 1); }
};

__device__ FragmentLane fragmentLane(int lane) { return {lane >> 2, lane & 3}; }

// acc (16, N) += a (16, K) x b (N, K)^T: a and b bf16 tiles in shared memory with rows of Ld::rows
// elements (a: the warp's 16 rows). S = Q K^T, dP~ = dO V^T, S^T = K Q^T, dP~^T = V dO^T.
template <int K, int N, int Row>
__device__ __forceinline__ void multiplyTransposed(float (&acc)[N / 8][4], const bf16* a, const bf16* b, int lane) {
  const int r = lane & 7, m = lane >> 3;  // this lane gives the address of row r of matrix m
#pragma unroll
  for (int kk = 0; kk < K / 16; ++kk) {
    uint32_t fa[4];  // matrices: rows 0-7 | 8-15 by columns kk*16 + 0-7 | 8-15
    mma::loadMatrices(fa, a + (r + 8 * (m & 1)) * Row + kk * 16 + 8 * (m >> 1));
#pragma unroll
    for (int n = 0; n < N / 8; n += 2) {
      uint32_t fb[4];  // rows of b 8n + 0-7 | 8n + 8-15 by columns kk*16 + 0-7 | 8-15: b^T's fragments n, n+1
      mma::loadMatrices(fb, b + (8 * n + r + 8 * (m >> 1)) * Row + kk * 16 + 8 * (m & 1));
      mma::multiplyAdd(acc[n], fa, fb[0], fb[1]);
      mma::multiplyAdd(acc[n + 1], fa, fb[2], fb[3]);
    }
  }
}

// acc (16, N) += a (16, K) x b (K, N): a in registers (toA), b a bf16 tile in shared memory with
// rows of Ld::rows elements. O += P~ V, dQ += dS K, dV += P~^T dO, dK += dS^T Q.
template <int K, int N, int Row>
__device__ __forceinline__ void multiply(float (&acc)[N / 8][4], const uint32_t (&a)[K / 16][4], const bf16* b,
                                         int lane) {
  const int r = lane & 7, m = lane >> 3;
#pragma unroll
  for (int kk = 0; kk < K / 16; ++kk) {
#pragma unroll
    for (int n = 0; n < N / 8; n += 2) {
      uint32_t fb[4];  // transposed: rows of b kk*16 + 0-7 | 8-15 by columns 8n + 0-7 | 8n + 8-15
      mma::loadMatricesTransposed(fb, b + (kk * 16 + r + 8 * (m & 1)) * Row + 8 * n + 8 * (m >> 1));
      mma::multiplyAdd(acc[n], a[kk], fb[0], fb[1]);
      mma::multiplyAdd(acc[n + 1], a[kk], fb[2], fb[3]);
    }
  }
}

// The same two products by the block's warpgroup (warpgroup_mma.cuh), on core-matrix tiles
// (core_matrix_tile.h) of 64 rows: each warp's acc is its 16 rows of the (64, N) product, in the
// same registers as above.
// acc (64, 64) += a (64, K) b (64, K)^T: S = Q K^T, issued as one committed group after the
// caller's wgmma::arrive(); acc holds it after the wait that completes the group. kFromZero:
// acc = a b^T, acc's values neither read nor needed (its first k-step overwrites them).
template <int K, bool kFromZero = false>
__device__ __forceinline__ void issueMultiplyTransposed(float (&acc)[8][4], const bf16* a, const bf16* b) {
  const uint64_t aFirst = wgmma::descriptor(a, core::kChunkBytes, core::kRowGroupBytes),
                 bFirst = wgmma::descriptor(b, core::kChunkBytes, core::kRowGroupBytes);
#pragma unroll
  for (int kk = 0; kk < K / 16; ++kk) {  // columns 16kk .. 16kk + 15: chunks 2kk, 2kk + 1
    const int start = core::offset(0, 16 * kk);
    if (kFromZero && kk == 0)
      wgmma::multiply(acc, aFirst, bFirst);
    else
      wgmma::multiplyAdd(acc, core::advanced(aFirst, start), core::advanced(bFirst, start));
  }
  wgmma::commit();
}
// The same, issued and waited for: acc is read right after.
template <int K>
__device__ __forceinline__ void warpgroupMultiplyTransposed(float (&acc)[8][4], const bf16* a, const bf16* b) {
  wgmma::fenceOperands(acc);
  wgmma::arrive();
  issueMultiplyTransposed<K>(acc, a, b);
  wgmma::wait();
  wgmma::fenceOperands(acc);
}
// P of a cell from its score: 0 where the logit is -inf (padding too). lse2: the row's log-sum-exp
// in base 2.
__device__ __forceinline__ float probability(float score, float toBase2, float lse2) {
  return exp2f(fmaf(score, toBase2, -lse2));
}

// The backward's dP = a b^T (from zero) issued, not waited for: the tensor cores compute it while
// the warp turns the scores into probabilities, until waitForScoreGrads. Issued after finishLogits:
// with dP's accumulators taken during finishLogits' masking, queryGrad's products spilled (ptxas
// sm_90a, D 64, held to 128 registers).
template <int K>
__device__ __forceinline__ void issueScoreGrads(float (&dP)[8][4], const bf16* a, const bf16* b) {
  wgmma::arrive();
  issueMultiplyTransposed<K, true>(dP, a, b);
}
__device__ __forceinline__ void waitForScoreGrads(float (&dP)[8][4]) {
  wgmma::wait();
  wgmma::fenceOperands(dP);
}

// acc (64, N) += a (64, 64) b (64, N): a this warp's rows in registers (toA), b read MN-major (its
// rows along K): O += P~ V, in 64-column halves at D 128. Issued as one committed group: neither
// acc nor a may be touched until the wait that completes it (then productDone).
template <int N>
__device__ __forceinline__ void issueMultiply(float (&acc)[N / 8][4], const uint32_t (&a)[kBc / 16][4], const bf16* b) {
  static_assert(N % 64 == 0, "whole 64-column products");
  auto& part = reinterpret_cast<float(&)[N / 64][8][4]>(acc);
  const uint64_t bFirst = wgmma::descriptor(b, core::kRowGroupBytes, core::kChunkBytes);
  wgmma::fenceOperands(acc);
  wgmma::arrive();
#pragma unroll
  for (int kk = 0; kk < kBc / 16; ++kk)  // rows 16kk .. 16kk + 15 of b: row groups 2kk, 2kk + 1
#pragma unroll
    for (int h = 0; h < N / 64; ++h)
      wgmma::multiplyAdd(part[h], a[kk], core::advanced(bFirst, core::offset(16 * kk, 64 * h)));
  wgmma::commit();
}
// After wgmma::wait(): acc's new values, and a kept (in the registers the product read) until here.
template <int N>
__device__ __forceinline__ void productDone(float (&acc)[N / 8][4], uint32_t (&a)[kBc / 16][4]) {
  wgmma::fenceOperands(acc);
  wgmma::fenceOperands(a);
}
// The same, issued and waited for.
template <int N>
__device__ __forceinline__ void warpgroupMultiply(float (&acc)[N / 8][4], uint32_t (&a)[kBc / 16][4], const bf16* b) {
  issueMultiply<N>(acc, a, b);
  wgmma::wait();
  productDone<N>(acc, a);
}

// A (16, K) fp32 product as the bf16 A operand of the next one: fragments 2kk and 2kk + 1 of x
// are A's columns kk*16 .. kk*16 + 15, and the C and A layouts put the same (row, column) in the
// same lane (FlashAttention-2's register reuse).
template <int K>
__device__ __forceinline__ void toA(uint32_t (&a)[K / 16][4], const float (&x)[K / 8][4]) {
#pragma unroll
  for (int kk = 0; kk < K / 16; ++kk) {
    a[kk][0] = mma::packBf16(x[2 * kk][0], x[2 * kk][1]);
    a[kk][1] = mma::packBf16(x[2 * kk][2], x[2 * kk][3]);
    a[kk][2] = mma::packBf16(x[2 * kk + 1][0], x[2 * kk + 1][1]);
    a[kk][3] = mma::packBf16(x[2 * kk + 1][2], x[2 * kk + 1][3]);
  }
}

// The elements of row r (0: g, 1: g + 8) of x times factor.
template <int N>
__device__ __forceinline__ void scaleRow(float (&x)[N / 8][4], int r, float factor) {
#pragma unroll
  for (int n = 0; n < N / 8; ++n) x[n][2 * r] *= factor, x[n][2 * r + 1] *= factor;
}

}  // namespace
}  // namespace xtrap::cuda
