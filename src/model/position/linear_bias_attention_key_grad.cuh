#pragma once
// keyGradKernel, the backward's pass over key tiles in both schemes (BackwardScheme::TwoPass:
// linear_bias_attention_backward_two_pass.cu; AtomicDq: linear_bias_attention_backward_atomic_dq.cu,
// whose dS^T and dQ adds are here too, with the kernel that uses them). linear_bias_attention.cu
// has the overview.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/core_matrix_tile.h"
#include "cuda/warp_mma.cuh"
#include "cuda/warpgroup_mma.cuh"
#include "model/position/linear_bias_attention.cuh"
#include "model/position/linear_bias_attention_layout.cuh"
#include "model/position/linear_bias_attention_products.cuh"
#include "model/position/linear_bias_attention_tile_block.cuh"
#include "model/position/linear_bias_tile.h"

namespace xtrap::cuda {
namespace {

// AtomicDq, its first step: this warp's dS^T (its 16 keys by the kBr queries of the tile, as the
// A fragments `a` of dK += dS^T Q) into the block's dS^T tile in shared memory, in the C layout's
// pairs (toA: a[kk] holds fragments 2kk and 2kk + 1, rows g and g + 8): rows of kDsRow elements,
// or with kCore a core-matrix tile (its rows the keys), where a warp's 32 stores of a pair fill
// one core matrix's 128 bytes.
template <bool kCore>
__device__ __forceinline__ void storeScoreGradT(bf16* dsT, const uint32_t (&a)[kBr / 16][4], const TileBlock& blk) {
  const int key = blk.stripe + blk.fl.g, query = 2 * blk.fl.t;
#pragma unroll
  for (int kk = 0; kk < kBr / 16; ++kk)
#pragma unroll
    for (int half = 0; half < 2; ++half)
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int row = key + 8 * r, column = query + 16 * kk + 8 * half;
        *reinterpret_cast<uint32_t*>(dsT + (kCore ? core::offset(row, column) : row * kDsRow + column)) =
            a[kk][2 * half + r];
      }
}

// AtomicDq's fp32 dQ, (B, H, stripes, kStripe x D) with 4 stripes of 16 queries a query tile (the
// sequence's last tile padded): each warp's (16, D) product of a pair is added in its fragment
// order, element e of lane l's fragment n at float 4 (32 n + l) + e of the stripe, so that the
// adds of a warp's fragment n fill 512 contiguous bytes (16 whole sectors; one vector add a lane on
// sm_90). Laid out as dq is, (row, column), one add of a warp reaches 8 rows, 4 floats in each of
// their sectors. FlashAttention-2 lays its dQ accumulator out in its threads' order for the same
// reason. roundQueryGradKernel reads it back through the same FragmentLane.
template <int D>
__device__ __forceinline__ float4* queryGradStripe(float* dqAccum, const Derived& dv, uint32_t batchHead,
                                                   int firstQuery) {
  return reinterpret_cast<float4*>(dqAccum + (int64_t(batchHead) * dv.qTiles * kBr + firstQuery) * D);
}
// x += fragment (4 floats), atomically: one vector add on sm_90, four float adds before it.
__device__ __forceinline__ void addFragment(float4* x, const float (&fragment)[4]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
  float* xs = reinterpret_cast<float*>(x);
  for (int e = 0; e < 4; ++e) atomicAdd(xs + e, fragment[e]);
#else
  atomicAdd(x, make_float4(fragment[0], fragment[1], fragment[2], fragment[3]));
#endif
}

// AtomicDq, its second step, once every warp has stored its dS^T: dQ += dS K for the query tile at
// r0, warp w taking queries [16w, 16w + 16) of it. dS is read back transposed (ldmatrix .trans of
// the (keys, queries) tile gives dS's A fragments), K is the block's own tile, and the (16, D)
// product is added to the warp's stripe of dqAccum (queryGradStripe, unscaled) by atomic adds:
// padding rows past T add their zeros to the padding. Blocks of other key tiles add to the same
// stripes in whatever order they arrive.
template <int D>
__device__ __forceinline__ void addQueryGrad(float* dqAccum, const Derived& dv, const bf16* dsT, const bf16* ks,
                                             const TileBlock& blk, int r0) {
  const int r = blk.lane & 7, m = blk.lane >> 3;
  uint32_t ds[kBc / 16][4];  // (16 queries, kBc keys): matrices queries 0-7 | 8-15 by keys 16kk + 0-7 | 8-15
#pragma unroll
  for (int kk = 0; kk < kBc / 16; ++kk)
    mma::loadMatricesTransposed(ds[kk], dsT + (16 * kk + 8 * (m >> 1) + r) * kDsRow + blk.stripe + 8 * (m & 1));
  float4* mine = queryGradStripe<D>(dqAccum, dv, blk.batchHead, r0 + blk.stripe) + blk.lane;
  // 16 columns of the (16, D) product at a time, added as soon as they are summed, in a loop that is
  // not unrolled: 8 accumulators live instead of the product's 32 at D 64. ptxas sm_90a spilled
  // 16 to 80 bytes at D 64 with the whole product, or with these steps unrolled, where the old
  // layout's float adds (a row-by-row layout with a test for rows past T) spilled none.
#pragma unroll 1
  for (int n = 0; n < D / 8; n += 2) {
    float dQ[2][4] = {};  // (16, 16): fragments n, n + 1
    multiply<kBc, 16, Ld<D>::rows>(dQ, ds, ks + 8 * n, blk.lane);
    addFragment(mine + 32 * n, dQ[0]);
    addFragment(mine + 32 * (n + 1), dQ[1]);
  }
}
// The same by the warpgroup MMA: dS^T and K core-matrix tiles (storeScoreGradT<true>, the block's
// own K), both read with their rows along K (the keys): dS as the A operand transposed, K as B
// transposed. In 64-column halves, each added as soon as it is waited for: 32 accumulators live.
template <int D>
__device__ __forceinline__ void addQueryGradWarpgroup(float* dqAccum, const Derived& dv, const bf16* dsT,
                                                      const bf16* ks, const TileBlock& blk, int r0) {
  const uint64_t aFirst = wgmma::descriptor(dsT, core::kRowGroupBytes, core::kChunkBytes),
                 bFirst = wgmma::descriptor(ks, core::kRowGroupBytes, core::kChunkBytes);
  float4* mine = queryGradStripe<D>(dqAccum, dv, blk.batchHead, r0 + blk.stripe) + blk.lane;
#pragma unroll
  for (int h = 0; h < D / 64; ++h) {
    float dQ[8][4];  // (16, 64): this warp's queries by columns 64h .. 64h + 63
    wgmma::arrive();
    wgmma::multiply<true, true>(dQ, aFirst, core::advanced(bFirst, core::offset(0, 64 * h)));
#pragma unroll
    for (int kk = 1; kk < kBc / 16; ++kk)  // keys 16kk .. 16kk + 15: row groups 2kk, 2kk + 1
      wgmma::multiplyAdd<true, true>(dQ, core::advanced(aFirst, core::offset(16 * kk, 0)),
                                     core::advanced(bFirst, core::offset(16 * kk, 64 * h)));
    wgmma::commit();
    wgmma::wait();
    wgmma::fenceOperands(dQ);
#pragma unroll
    for (int n = 0; n < 8; ++n) addFragment(mine + 32 * (8 * h + n), dQ[n]);
  }
}

// grid (ceil(T / kBc), H, B): one block per key tile; dK, dV summed over every query tile (and with
// kAtomicDq each pair's dS K added to dqAccum: addQueryGrad). Its warps work transposed: S^T = K Q^T
// with the warp's 16 keys as rows, so that P~^T and dS^T are the A operands of dV += P~^T dO and
// dK += dS^T Q.
// With kBiasGrads (kAtomicDq only) it also sums the bias gradients of its cells, centred on the
// forward's row weights (tile::CentredBiasGrads), into partials[(b * H + h) * tiles + tile][3].
// D 64 without dropout: at most 168 registers, so that 3 blocks fit an SM (ptxas chose 183 after
// copyRows' unrolling, which fits 2; held to 168 it spills none on sm_90a).
// kWarpgroup: the four products (with kAtomicDq five) by the warpgroup MMA on core-matrix tiles of
// K, V, Q, dO (and dS^T), the block's 64 keys one wgmma's M (64 queries in dS K).
template <int D, bool kDropout, bool kAtomicDq, bool kBiasGrads = false, bool kWarpgroup = false>
__global__ void __launch_bounds__(kThreads, D == 64 && !kDropout ? 3 : 0)
    keyGradKernel(const BackwardArgs args, const Derived dv, const float* rowDotAll, float* dqAccum, double* partials) {
  const uint64_t seed = dropoutSeed<kDropout>(args.rng, nullptr);
  static_assert(kAtomicDq || !kBiasGrads, "TwoPass sums the bias gradients in queryGrad");
  using S = KeyGradSmem<D>;
  using A = KeyGradAtomicSmem<D>;  // kAtomicDq only
  bf16 *ks = smemAt<bf16>(S::k), *vs = smemAt<bf16>(S::v), *qs = smemAt<bf16>(S::q), *dOs = smemAt<bf16>(S::dO);
  float *lses = smemAt<float>(S::lse), *rowDots = smemAt<float>(S::rowDot);
  bf16* dsT = smemAt<bf16>(A::dsT);
  float* weights = smemAt<float>(A::weights);         // (2 buffers, 3 statistics, kBr)
  double* warpPartials = smemAt<double>(A::partial);  // (kWarps, 3)
  constexpr int Row = Ld<D>::rows;

  const TileBlock blk =
      tileBlock(args.shape, args.bias, tile::Walk::Queries, args.tileBounds, args.scale);  // its tile: keys [c0, c1)
  const FragmentLane& fl = blk.fl;
  const int c0 = blk.lo;
  bf16 *kStripe = ks + blk.stripe * Row, *vStripe = vs + blk.stripe * Row;

  copyRows<D, kWarpgroup>(ks, args.k, blk, c0);
  copyRows<D, kWarpgroup>(vs, args.v, blk, c0);

  // This lane's two keys (rows of S^T) and their dropout group: keys j and j + 8 of one query are
  // words w and w + 2 of one draw (tile::dropoutGroup).
  const int j[2] = {blk.position(0), blk.position(1)};
  const int group = tile::dropoutGroup(j[0]), word = tile::dropoutWord(j[0]);
  float dK[D / 8][4] = {}, dV[D / 8][4] = {};  // (16, D)
  tile::BiasGrads<double> grads;               // kBiasGrads: this lane's cells, summed in a fixed order
  const int64_t weightPlane = int64_t(args.shape.B) * args.shape.H * blk.T;

  const HeadsView qHead = heldHead(args.q, blk), dOHead = heldHead(args.dO, blk);
  auto load = [&](int r0, int buffer) {
    copyRows<D, kWarpgroup>(qs + buffer * Ld<D>::tile, qHead, blk, r0);
    copyRows<D, kWarpgroup>(dOs + buffer * Ld<D>::tile, dOHead, blk, r0);
    copyRowStats(lses + buffer * Ld<D>::stat, rowDots + buffer * Ld<D>::stat, args.lse, rowDotAll, blk, r0);
    if constexpr (kBiasGrads)
      for (int p = 0; p < 3; ++p)
        copyRowStat(weights + (3 * buffer + p) * Ld<D>::stat, args.rowWeights + p * weightPlane, blk, r0);
  };
  pipelinedWalk<kWarpgroup>(blk, tile::Walk::Queries, load, [&](int r0, int buffer) {
    const bf16 *q = qs + buffer * Ld<D>::tile, *dO = dOs + buffer * Ld<D>::tile;
    const float *lseOf = lses + buffer * Ld<D>::stat, *rowDotOf = rowDots + buffer * Ld<D>::stat;
    // (16 keys, kBr queries): the scores^T (startLogits) and dP~^T, then P^T, then P~^T and dS^T
    // (dST cleared for mma.sync's product, which adds to it; the warpgroup MMA's overwrites it)
    float pT[kBr / 8][4], dST[kBr / 8][4] = {};
    const tile::LinearTile lt = blk.linearTile(tile::Walk::Queries, r0);
    const float toBase2 = startLogits<true>(pT, blk, lt, args.scale, j, r0);
    if constexpr (kWarpgroup)
      warpgroupMultiplyTransposed<D>(pT, ks, q);
    else
      multiplyTransposed<D, kBr, Row>(pT, kStripe, q, blk.lane);
    finishLogits<true>(pT, blk, lt, args.scale, j, r0);
    if constexpr (kWarpgroup)
      issueScoreGrads<D>(dST, vs, dO);
    else
      multiplyTransposed<D, kBr, Row>(dST, vStripe, dO, blk.lane);
    if constexpr (kWarpgroup) {  // P^T while dP~^T's product is in flight (mma.sync's: cell by cell below)
#pragma unroll
      for (int n = 0; n < kBr / 8; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) pT[n][e] = probability(pT[n][e], toBase2, lseOf[fl.column(n, e & 1)]);
      waitForScoreGrads(dST);
    }
    // kBiasGrads: on a linear tile without first-token cells every cell is of lt.term, at ld's
    // distance; elsewhere biasCell says.
    const bool termTile = lt.linear && !lt.hasFirstTokenCells();
    const LinearDistance ld = linearDistance<true>(blk, lt, r0, j);
    const float* weightOf = weights + 3 * buffer * Ld<D>::stat;
    tile::CentredBiasGrads<float> tileGrads;
#pragma unroll
    for (int n = 0; n < kBr / 8; ++n)
#pragma unroll
      for (int c = 0; c < 2; ++c) {  // query column fl.column(n, c) of both rows
        const int column = fl.column(n, c), i = r0 + column;
        const float lse2 = lseOf[column], rowDot = rowDotOf[column];
        const uint32_t keep = keepGroup<kDropout>(seed, dv, blk.batchHead, i, group);
        tile::BiasGrads<float> rowWeight;  // query i's
        if constexpr (kBiasGrads)
          rowWeight.past = weightOf[column], rowWeight.future = weightOf[Ld<D>::stat + column],
          rowWeight.first = weightOf[2 * Ld<D>::stat + column];
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          const int e = 2 * r + c;
          const bool kept = (keep >> (word + 2 * r)) & 1u;
          const float prob = kWarpgroup ? pT[n][e] : probability(pT[n][e], toBase2, lse2);
          if constexpr (kBiasGrads) {
            const float u = prob * tile::afterDropout(dST[n][e], kept, keepScale<kDropout>(dv));
            if (termTile)
              tileGrads.add({lt.term, ld.cell(r, n, c)}, u, rowWeight);
            else if (i < blk.T && j[r] < blk.T)
              tileGrads.add(tile::biasCell(blk.hb, i, j[r]), u, rowWeight);
          }
          dST[n][e] = tile::scoreGrad(prob, dST[n][e], kept, keepScale<kDropout>(dv), rowDot);
          pT[n][e] = tile::afterDropout(prob, kept, keepScale<kDropout>(dv));
        }
      }
    if constexpr (kBiasGrads)
      grads.past += tileGrads.past, grads.future += tileGrads.future, grads.first += tileGrads.first;
    // With the warpgroup MMA dV's product is in flight while dS^T becomes its A operand, then waited
    // for with dK's; with AtomicDq (fixed slopes) with dS K's too, after the barrier. With bias
    // gradients the three in flight at once spilled (ptxas sm_90a, D 64: 184 bytes against 48).
    constexpr bool kWaitWithDq = kWarpgroup && kAtomicDq && !kBiasGrads;
    uint32_t a[kBr / 16][4], aS[kBr / 16][4];  // P~^T, dS^T
    toA<kBr>(a, pT);
    if constexpr (kWarpgroup)
      issueMultiply<D>(dV, a, dO);
    else
      multiply<kBr, D, Row>(dV, a, dO, blk.lane);  // dV += P~^T dO
    toA<kBr>(aS, dST);
    if constexpr (kAtomicDq) storeScoreGradT<kWarpgroup>(dsT, aS, blk);
    if constexpr (kWarpgroup) {
      issueMultiply<D>(dK, aS, q);
      if constexpr (!kWaitWithDq) wgmma::wait();
    } else {
      multiply<kBr, D, Row>(dK, aS, q, blk.lane);  // dK += dS^T Q
    }
    if constexpr (kAtomicDq) {
      if constexpr (kWarpgroup) wgmma::fenceSharedWrites();  // dS^T's stores, for the async proxy
      __syncthreads();  // every warp's dS^T is in dsT (pipelinedWalk's next barrier precedes its next write)
      if constexpr (kWarpgroup)
        addQueryGradWarpgroup<D>(dqAccum, dv, dsT, ks, blk, r0);  // its wait: every product's
      else
        addQueryGrad<D>(dqAccum, dv, dsT, ks, blk, r0);
    }
    if constexpr (kWarpgroup) {
      productDone<D>(dV, a);
      productDone<D>(dK, aS);
    }
  });
  // With kWarpgroup every warp's products read all of K's and V's tiles: the walk's last barrier
  // comes after each warp's last wait, before any stripe of them is overwritten here.
  storeStripe<D>(args.dk, dK, args.scale, kStripe, blk);
  storeStripe<D>(args.dv, dV, 1.f, vStripe, blk);
  if constexpr (kBiasGrads)
    sumBlockGrads(grads, warpPartials, partials + (int64_t(blk.batchHead) * gridDim.x + blk.lo / kBc) * 3, blk.warp,
                  blk.lane);
}

// grid (ceil(T / kBr), H, B): one block per query tile; dQ summed over every key tile, and with
// kBiasGrads this block's share of the bias gradients written to
// partials[(b * H + h) * qTiles + tile][3]. kBiasGrads is a template parameter so that the
// fixed-slope backward compiles without the per-cell bias bookkeeping. D 64 without bias gradients:
// held to 128 registers (ptxas chose 129), so that 4 blocks fit an SM as their shared memory allows.

}  // namespace
}  // namespace xtrap::cuda
