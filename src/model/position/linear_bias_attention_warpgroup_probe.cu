// linearBiasAttentionProbeWarpgroupProducts (linear_bias_attention.cuh): the warpgroup MMA's tile
// products of the fused ALiBi-family attention kernels alone, through their own functions.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/core_matrix_tile.h"
#include "cuda/warpgroup_mma.cuh"
#include "model/position/linear_bias_attention.cuh"
#include "model/position/linear_bias_attention_key_grad.cuh"
#include "model/position/linear_bias_attention_launch.cuh"
#include "model/position/linear_bias_attention_layout.cuh"
#include "model/position/linear_bias_attention_products.cuh"
#include "model/position/linear_bias_attention_tile_block.cuh"

namespace xtrap::cuda {
namespace {

// This warp's rows of a (64, N) fp32 accumulator into row-major out.
template <int N>
__device__ void storeRowMajor(float* out, const float (&acc)[N / 8][4], const TileBlock& blk) {
#pragma unroll
  for (int n = 0; n < N / 8; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) out[(blk.stripe + blk.fl.row(e)) * N + blk.fl.column(n, e)] = acc[n][e];
}

// One block, one warpgroup: q, k and v as core-matrix tiles in shared memory, p in each lane's
// registers where the accumulators' elements would be (as the kernels hold P~ and dS^T), then each
// product of WarpgroupProductsProbe through the kernels' own functions.
template <int D>
__global__ void __launch_bounds__(kThreads) warpgroupProductsProbeKernel(const WarpgroupProductsProbe probe) {
  bf16 *qs = smemAt<bf16>(0), *ks = qs + kBr * D, *vs = ks + kBr * D, *pT = vs + kBr * D;
  const auto *q = static_cast<const bf16*>(probe.q), *k = static_cast<const bf16*>(probe.k),
             *v = static_cast<const bf16*>(probe.v), *p = static_cast<const bf16*>(probe.p);
  for (int e = int(threadIdx.x); e < kBr * D; e += kThreads) {
    const int at = core::offset(e / D, e % D);
    qs[at] = q[e], ks[at] = k[e], vs[at] = v[e];
  }
  TileBlock blk{};
  blk.warp = int(threadIdx.x) / 32, blk.lane = int(threadIdx.x) % 32, blk.stripe = blk.warp * kStripe;
  blk.fl = fragmentLane(blk.lane);
  float pRows[kBc / 8][4];  // this warp's rows of p
#pragma unroll
  for (int n = 0; n < kBc / 8; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e)
      pRows[n][e] = __bfloat162float(p[(blk.stripe + blk.fl.row(e)) * kBc + blk.fl.column(n, e)]);
  uint32_t a[kBc / 16][4];
  toA<kBc>(a, pRows);
  wgmma::fenceSharedWrites();
  __syncthreads();

  float acc[kBc / 8][4] = {};
  warpgroupMultiplyTransposed<D>(acc, qs, ks);
  storeRowMajor<kBc>(probe.s, acc, blk);
  issueScoreGrads<D>(acc, qs, ks);
  waitForScoreGrads(acc);
  storeRowMajor<kBc>(probe.sFromZero, acc, blk);
  float o[D / 8][4] = {};
  warpgroupMultiply<D>(o, a, vs);
  storeRowMajor<D>(probe.o, o, blk);

  // p as AtomicDq's dS^T: stored, then dq = p^T k added into probe.dq laid out in stripes
  // (queryGradStripe: one query tile) at this lane's own float4s, which it clears first and reads
  // back after, then writes row-major once its warp has read all of its stripe.
  storeScoreGradT<true>(pT, a, blk);
  wgmma::fenceSharedWrites();
  __syncthreads();
  Derived dv;
  dv.qTiles = 1;
  float4* mine = queryGradStripe<D>(probe.dq, dv, 0, blk.stripe) + blk.lane;
#pragma unroll
  for (int n = 0; n < D / 8; ++n) mine[32 * n] = make_float4(0.f, 0.f, 0.f, 0.f);
  addQueryGradWarpgroup<D>(probe.dq, dv, pT, ks, blk, 0);
#pragma unroll
  for (int n = 0; n < D / 8; ++n) {
    const float4 sum = mine[32 * n];
    o[n][0] = sum.x, o[n][1] = sum.y, o[n][2] = sum.z, o[n][3] = sum.w;
  }
  __syncwarp();
  storeRowMajor<D>(probe.dq, o, blk);
}

}  // namespace

namespace linear_bias_passes {

cudaError_t probeWarpgroupProducts(const WarpgroupProductsProbe& probe, cudaStream_t stream) {
  const auto kernel = probe.D == 64 ? warpgroupProductsProbeKernel<64> : warpgroupProductsProbeKernel<128>;
  const size_t bytes = (3 * size_t(kBr) * probe.D + kBr * kBc) * sizeof(bf16);
  if (cudaError_t e = allowSharedMemory(kernel, bytes); e != cudaSuccess) return e;
  return launch(kernel, dim3(1), bytes, stream, probe);
}

}  // namespace linear_bias_passes
}  // namespace xtrap::cuda
