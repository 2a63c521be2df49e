// The fused ALiBi-family attention's forward (linear_bias_attention.cu has the overview): the
// tile bounds and walks that leave negligible pairs out, then forwardKernel.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cfloat>
#include <cstdint>

#include "cuda/bf16_words.cuh"
#include "model/position/linear_bias_attention.cuh"
#include "model/position/linear_bias_attention_launch.cuh"
#include "model/position/linear_bias_attention_layout.cuh"
#include "model/position/linear_bias_attention_products.cuh"
#include "model/position/linear_bias_attention_tile_block.cuh"
#include "model/position/linear_bias_tile.h"

namespace xtrap::cuda {
namespace {

// ---- the tile bounds of negligible pairs ----

// grid (ceil(T / kBr), H, B): each 64-row tile's tile::TileBound into bounds[(b * H + h) * tiles +
// tile]. Two threads a row, each summing q.q, k.k and q.k over half of the row in fp32 from 16-byte
// loads; then the tile's largest norms and smallest scale q.k over its rows below T, the warps'
// through shared memory (kWarps x 4 floats). A row that is not finite (an overflow, a NaN) makes
// the tile's bounds NaN: negligibleTile then flags none of its pairs.
template <int D>
__global__ void __launch_bounds__(kThreads) tileBoundsKernel(const ForwardArgs args, tile::TileBound* bounds) {
  constexpr int kHalf = D / 2, kWords = kHalf / 8;  // a thread's elements, and its 16-byte loads of q and of k
  const int b = blockIdx.z, h = blockIdx.y, i = int(blockIdx.x) * kBr + int(threadIdx.x) / 2;
  tile::TileBound& out = bounds[(int64_t(b) * gridDim.y + h) * gridDim.x + blockIdx.x];
  // A head whose bias stays above the bound within T: bounds that skip nothing (not finite), and
  // its q and k not read (tile::biasCanReachNegligible).
  if (!tile::biasCanReachNegligible(headBias(args.bias, h), args.shape.T, kBr)) {
    if (threadIdx.x == 0) out = tile::TileBound{NAN, NAN, NAN, 0.f};
    return;
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const bool inside = i < args.shape.T;
  float qq = 0.f, kk = 0.f, qk = 0.f;
  if (inside) {
    const int col = int(threadIdx.x % 2) * kHalf;
    const uint4* q = reinterpret_cast<const uint4*>(headRows(args.q, b, h) + int64_t(i) * args.q.st + col);
    const uint4* k = reinterpret_cast<const uint4*>(headRows(args.k, b, h) + int64_t(i) * args.k.st + col);
#pragma unroll
    for (int w = 0; w < kWords; ++w) {
      const uint4 qw4 = q[w], kw4 = k[w];
      const uint32_t qw[4] = {qw4.x, qw4.y, qw4.z, qw4.w}, kw[4] = {kw4.x, kw4.y, kw4.z, kw4.w};
#pragma unroll
      for (int x = 0; x < 4; ++x) {
        const float q0 = lowBf16(qw[x]), q1 = highBf16(qw[x]), k0 = lowBf16(kw[x]), k1 = highBf16(kw[x]);
        qq = fmaf(q1, q1, fmaf(q0, q0, qq));
        kk = fmaf(k1, k1, fmaf(k0, k0, kk));
        qk = fmaf(q1, k1, fmaf(q0, k0, qk));
      }
    }
  }
  qq += __shfl_xor_sync(0xffffffffu, qq, 1);
  kk += __shfl_xor_sync(0xffffffffu, kk, 1);
  qk += __shfl_xor_sync(0xffffffffu, qk, 1);
  // Neutral past T: norms 0 for the max, +inf for the min. fmaxf and fminf drop a NaN, so a row
  // that is not finite is counted apart.
  float queryNorm = inside ? sqrtf(qq) : 0.f, keyNorm = inside ? sqrtf(kk) : 0.f;
  float diagonal = inside ? args.scale * qk : INFINITY;
  float notFinite = inside && !(fabsf(qq) <= FLT_MAX && fabsf(kk) <= FLT_MAX && fabsf(qk) <= FLT_MAX) ? 1.f : 0.f;
  for (int o = 2; o < 32; o <<= 1) {  // the warp's 16 rows
    queryNorm = fmaxf(queryNorm, __shfl_xor_sync(0xffffffffu, queryNorm, o));
    keyNorm = fmaxf(keyNorm, __shfl_xor_sync(0xffffffffu, keyNorm, o));
    diagonal = fminf(diagonal, __shfl_xor_sync(0xffffffffu, diagonal, o));
    notFinite = fmaxf(notFinite, __shfl_xor_sync(0xffffffffu, notFinite, o));
  }
  float* partial = smemAt<float>(0);  // (kWarps, 4)
  if (lane == 0)
    partial[4 * warp] = queryNorm, partial[4 * warp + 1] = keyNorm, partial[4 * warp + 2] = diagonal,
                partial[4 * warp + 3] = notFinite;
  __syncthreads();
  if (threadIdx.x != 0) return;
  for (int w = 1; w < kWarps; ++w) {
    queryNorm = fmaxf(queryNorm, partial[4 * w]), keyNorm = fmaxf(keyNorm, partial[4 * w + 1]);
    diagonal = fminf(diagonal, partial[4 * w + 2]), notFinite = fmaxf(notFinite, partial[4 * w + 3]);
  }
  tile::TileBound bound;
  bound.queryNorm = notFinite > 0.f ? NAN : queryNorm;
  bound.keyNorm = notFinite > 0.f ? NAN : keyNorm;
  bound.diagonal = notFinite > 0.f ? NAN : diagonal;
  out = bound;
}
constexpr size_t kTileBoundsSmem = kWarps * 4 * sizeof(float);

// grid (ceil(T / kBr), H, B), after tileBoundsKernel: each tile's TileWalks, warp w scanning
// (TileBlock::scanVisits) for field w: the first and the last key tile of the query tile's walk,
// then of the key tile's walk over query tiles.
__global__ void __launch_bounds__(kThreads) tileWalksKernel(const ForwardArgs args) {
  const TileBlock blk = tileBlockAt(args.shape, args.bias, int(blockIdx.x), args.tileBounds, args.scale);
  const bool fromEnd = blk.warp % 2 == 1;
  const int found = blk.scanVisits(blk.warp < 2 ? tile::Walk::Keys : tile::Walk::Queries, fromEnd);
  // blk.walks is the head's row of args.tileBounds' walks, read-only to the tile kernels.
  if (blk.lane == 0)
    reinterpret_cast<int*>(const_cast<TileWalks*>(blk.walks) + blockIdx.x)[blk.warp] = fromEnd ? found + kBr : found;
}

// ---- forward ----

// grid (ceil(T / kBr), H, B): one block per 64-row query tile, warp w owning its stripe w. Writes
// O (B, H, T, D) and lse (B, H, T). ptxas sm_90a, D 64: held to 128 registers (no spills), so that
// 4 blocks fit an SM as their shared memory allows. A minimum of 0 blocks is none (no
// .minnctapersm): a minimum of 1 made ptxas take more registers than none did. With kRowWeights it
// also writes args.rowWeights, summed like the row's sum of P: rescaled with it, divided by it.
// kWarpgroup: the two products by the warpgroup MMA (TileProducts::WarpgroupMma) on core-matrix
// tiles of Q, K and V; the rest is the same code.
// The key tiles are walked from the last to the first, and a warp rescales its rows' sums and O
// only where a row's max grows by more than kRescaleSlack (FlashAttention-4's threshold). In a
// causal walk the first tile is then the diagonal's, where ALiBi's bias is largest, and later
// tiles seldom raise a max past it: by bench/forward_rescales.py, 7.8% of a warp's steps rescale
// at B8 L2048 and 1.9% at L16384, where a walk from the first tile rescaled at every step before
// and would at 47% and 25% with the threshold. A step that skips it takes 42 instructions fewer
// (SASS sm_90a, D 64, warpgroup MMA: 318 against 360).
template <int D, bool kDropout, bool kRowWeights, bool kWarpgroup = false>
__global__ void __launch_bounds__(kThreads, D == 64 ? 4 : 0) forwardKernel(const ForwardArgs args, const Derived dv) {
  const uint64_t seed = dropoutSeed<kDropout>(args.rng, args.resolvedRng);  // first: block 0 records it
  using S = ForwardSmem<D>;
  bf16 *qs = smemAt<bf16>(S::q), *ks = smemAt<bf16>(S::k), *vs = smemAt<bf16>(S::v);
  constexpr int Row = Ld<D>::rows;

  const TileBlock blk =
      tileBlock(args.shape, args.bias, tile::Walk::Keys, args.tileBounds, args.scale);  // its tile: query rows [r0, r1)
  const FragmentLane& fl = blk.fl;
  const int T = blk.T, r0 = blk.lo;
  bf16* qStripe = qs + blk.stripe * Row;

  copyRows<D, kWarpgroup>(qs, args.q, blk, r0);

  // This lane's two rows: their running max (base 2, the same in the row's 4 lanes) and this
  // lane's share of their running sum and of their O.
  const int i[2] = {blk.position(0), blk.position(1)};
  // The max starts at -FLT_MAX, not -inf: exp2 of a logit or of a max less it is 0 all the same, and
  // neither the rescaling nor P needs a test for -inf (a row of padding past T keeps it, its P and
  // its rescaling factor exp2(0) = 1 leave its sum and O at 0).
  float rowMax[2] = {-FLT_MAX, -FLT_MAX}, rowSum[2] = {0.f, 0.f};
  float o[D / 8][4] = {};            // (16, D)
  tile::BiasGrads<float> weight[2];  // kRowWeights: this lane's share of its rows' sum of P~ c

  const HeadsView kHead = heldHead(args.k, blk), vHead = heldHead(args.v, blk);
  auto load = [&](int c0, int buffer) {
    copyRows<D, kWarpgroup>(ks + buffer * Ld<D>::tile, kHead, blk, c0);
    copyRows<D, kWarpgroup>(vs + buffer * Ld<D>::tile, vHead, blk, c0);
  };
  pipelinedWalk<kWarpgroup, true>(blk, tile::Walk::Keys, load, [&](int c0, int buffer) {
    const bf16 *k = ks + buffer * Ld<D>::tile, *v = vs + buffer * Ld<D>::tile;
    float s[kBc / 8][4];  // (16, kBc): the scores (startLogits), then P~
    const tile::LinearTile lt = blk.linearTile(tile::Walk::Keys, c0);
    const float toBase2 = startLogits<false>(s, blk, lt, args.scale, i, c0);
    if constexpr (kWarpgroup)
      warpgroupMultiplyTransposed<D>(s, qs, k);
    else
      multiplyTransposed<D, kBc, Row>(s, qStripe, k, blk.lane);
    finishLogits<false>(s, blk, lt, args.scale, i, c0);
    // kRowWeights: on a linear tile without first-token cells every cell is of lt.term, at ld's
    // distance; elsewhere biasCell says.
    const bool termTile = lt.linear && !lt.hasFirstTokenCells();
    const LinearDistance ld = linearDistance<false>(blk, lt, c0, i);
    float tileMax[2];  // each row's largest base-2 logit in the tile
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float scoreMax = -INFINITY;  // toBase2 > 0 makes it the base-2 logits' max
#pragma unroll
      for (int n = 0; n < kBc / 8; ++n) scoreMax = fmaxf(scoreMax, fmaxf(s[n][2 * r], s[n][2 * r + 1]));
      tileMax[r] = groupMax(scoreMax) * toBase2;
    }
    // A row's running max moves, and its sum and O are rescaled, only when a row of the warp finds
    // a logit more than kRescaleSlack above its max; until then its P may reach 2^kRescaleSlack,
    // which fp32 sums and bf16 P~ hold as they hold P <= 1. A row's first finite logit always
    // rescales (from -FLT_MAX).
    if (__any_sync(0xffffffffu, tileMax[0] > rowMax[0] + kRescaleSlack || tileMax[1] > rowMax[1] + kRescaleSlack)) {
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const float newMax = fmaxf(rowMax[r], tileMax[r]), alpha = exp2f(rowMax[r] - newMax);
        rowSum[r] *= alpha;
        if constexpr (kRowWeights) weight[r].past *= alpha, weight[r].future *= alpha, weight[r].first *= alpha;
        scaleRow<D>(o, r, alpha);
        rowMax[r] = newMax;
      }
    }
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float tileSum = 0.f, termWeight = 0.f;
      tile::BiasGrads<float> tileWeight;
#pragma unroll
      for (int m = 0; m < kBc / 16; ++m) {  // fragments 2m, 2m + 1: one dropout group per lane
        const uint32_t keep = groupKeep<kDropout>(seed, dv, blk, i[r], c0, m);
#pragma unroll
        for (int word = 0; word < 4; ++word) {
          const int n = 2 * m + (word >> 1), c = word & 1;
          float& p = s[n][2 * r + c];
          const float prob = exp2f(fmaf(p, toBase2, -rowMax[r]));
          tileSum += prob;  // the sum before dropout
          p = tile::afterDropout(prob, (keep >> word) & 1u, keepScale<kDropout>(dv));
          if constexpr (kRowWeights) {
            const int j = c0 + fl.column(n, c);
            if (termTile)
              termWeight -= prob * ld.cell(r, n, c);
            else if (i[r] < T && j < T)
              tileWeight.add(tile::biasCell(blk.hb, i[r], j), prob);
          }
        }
      }
      if constexpr (kRowWeights) {
        if (termTile) (lt.term == tile::BiasTerm::Past ? tileWeight.past : tileWeight.future) += termWeight;
        weight[r].past += tileWeight.past, weight[r].future += tileWeight.future, weight[r].first += tileWeight.first;
      }
      rowSum[r] += tileSum;
    }
    uint32_t p[kBc / 16][4];
    toA<kBc>(p, s);
    if constexpr (kWarpgroup)
      warpgroupMultiply<D>(o, p, v);
    else
      multiply<kBc, D, Row>(o, p, v, blk.lane);  // O += P~ V
  });

  // O = accumulator / l, the row's sum being its 4 lanes' shares, and the log-sum-exp.
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const float l = groupSum(rowSum[r]);
    const bool empty = !(l > 0.f);  // only past T: the diagonal is never blocked
    scaleRow<D>(o, r, empty ? 0.f : 1.f / l);
    if (fl.t == 0 && i[r] < T) blk.stats(args.lse)[i[r]] = empty ? INFINITY : rowMax[r] + log2f(l);
    if constexpr (kRowWeights) {
      // (3, B, H, T): the planes of slopePast, slopeFuture, firstTokenBias.
      const int64_t plane = int64_t(args.shape.B) * args.shape.H * T;
      const float past = groupSum(weight[r].past), future = groupSum(weight[r].future),
                  first = groupSum(weight[r].first);
      if (fl.t == 0 && i[r] < T) {
        float* w = blk.stats(args.rowWeights) + i[r];
        w[0] = past / l, w[plane] = future / l, w[2 * plane] = first / l;
      }
    }
  }
  // With kWarpgroup every warp's products read all of Q's tile: the walk's last barrier comes after
  // each warp's last wait, before any stripe of it is overwritten here.
  storeStripe<D>(args.o, o, 1.f, qStripe, blk);
}

template <int D>
cudaError_t launchForward(const ForwardArgs& args, cudaStream_t stream) {
  const Derived dv = derive(args.shape, args.dropout);
  const bool dropout = dv.threshold > 0;
  const dim3 grid(dv.qTiles, args.shape.H, args.shape.B);
  if (args.tileBounds != nullptr) {
    if (cudaError_t e = launch(tileBoundsKernel<D>, grid, kTileBoundsSmem, stream, args,
                               reinterpret_cast<tile::TileBound*>(args.tileBounds));
        e != cudaSuccess)
      return e;
    if (cudaError_t e = launch(tileWalksKernel, grid, 0, stream, args); e != cudaSuccess) return e;
  }
  const bool warpgroup = args.products == TileProducts::WarpgroupMma;
  const auto kernel =
      warpgroup
          ? (args.rowWeights ? (dropout ? forwardKernel<D, true, true, true> : forwardKernel<D, false, true, true>)
                             : (dropout ? forwardKernel<D, true, false, true> : forwardKernel<D, false, false, true>))
          : (args.rowWeights ? (dropout ? forwardKernel<D, true, true> : forwardKernel<D, false, true>)
                             : (dropout ? forwardKernel<D, true, false> : forwardKernel<D, false, false>));
  const size_t bytes = ForwardSmem<D>::bytes;
  if (cudaError_t e = allowSharedMemory(kernel, bytes); e != cudaSuccess) return e;
  return launch(kernel, grid, bytes, stream, args, dv);
}

template <int D>
cudaError_t forwardKernelFactsOf(KernelFacts* facts) {
  FactsFiller fill{facts};
  fill.add(FactsSlot::Forward, forwardKernel<D, false, false>, "forward", ForwardSmem<D>::bytes);
  fill.add(FactsSlot::ForwardWeights, forwardKernel<D, false, true>, "forward+weights", ForwardSmem<D>::bytes);
  fill.add(FactsSlot::TileBounds, tileBoundsKernel<D>, "tileBounds", kTileBoundsSmem);
  fill.add(FactsSlot::TileWalks, tileWalksKernel, "tileWalks", 0);
  fill.add(FactsSlot::ForwardWarpgroup, forwardKernel<D, false, false, true>, "forward+wgmma", ForwardSmem<D>::bytes);
  return fill.error;
}

}  // namespace

namespace linear_bias_passes {

cudaError_t forward(const ForwardArgs& args, cudaStream_t stream) {
  return args.shape.D == 64 ? launchForward<64>(args, stream) : launchForward<128>(args, stream);
}

cudaError_t forwardKernelFacts(int D, KernelFacts* facts) {
  return D == 64 ? forwardKernelFactsOf<64>(facts) : forwardKernelFactsOf<128>(facts);
}

}  // namespace linear_bias_passes
}  // namespace xtrap::cuda
