// The fused ALiBi-family attention's backward in BackwardScheme::TwoPass (linear_bias_attention.cu
// has the overview): keyGradKernel (linear_bias_attention_key_grad.cuh) for dK and dV, then
// queryGradKernel for dQ and the bias gradients, each output summed by one block.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "model/position/linear_bias_attention.cuh"
#include "model/position/linear_bias_attention_key_grad.cuh"
#include "model/position/linear_bias_attention_launch.cuh"
#include "model/position/linear_bias_attention_layout.cuh"
#include "model/position/linear_bias_attention_products.cuh"
#include "model/position/linear_bias_attention_tile_block.cuh"
#include "model/position/linear_bias_tile.h"

namespace xtrap::cuda {
namespace {

// grid (ceil(T / kBr), H, B): one block per query tile; dQ summed over every key tile, and with
// kBiasGrads this block's share of the bias gradients written to
// partials[(b * H + h) * qTiles + tile][3]. kBiasGrads is a template parameter so that the
// fixed-slope backward compiles without the per-cell bias bookkeeping. D 64 without bias gradients:
// held to 128 registers (ptxas chose 129), so that 4 blocks fit an SM as their shared memory allows.
// kWarpgroup: the three products by the warpgroup MMA on core-matrix tiles of Q, dO, K and V.
template <int D, bool kBiasGrads, bool kDropout, bool kWarpgroup = false>
__global__ void __launch_bounds__(kThreads, D == 64 && !kBiasGrads ? 4 : 0)
    queryGradKernel(const BackwardArgs args, const Derived dv, const float* rowDotAll, double* partials) {
  const uint64_t seed = dropoutSeed<kDropout>(args.rng, nullptr);
  using S = QueryGradSmem<D>;
  bf16 *qs = smemAt<bf16>(S::q), *dOs = smemAt<bf16>(S::dO), *ks = smemAt<bf16>(S::k), *vs = smemAt<bf16>(S::v);
  float *lses = smemAt<float>(S::lse), *rowDots = smemAt<float>(S::rowDot);
  double* warpPartials = smemAt<double>(S::partial);  // (kWarps, 3)
  constexpr int Row = Ld<D>::rows;

  const TileBlock blk =
      tileBlock(args.shape, args.bias, tile::Walk::Keys, args.tileBounds, args.scale);  // its tile: query rows [r0, r1)
  const FragmentLane& fl = blk.fl;
  const int T = blk.T, r0 = blk.lo;
  bf16 *qStripe = qs + blk.stripe * Row, *dOStripe = dOs + blk.stripe * Row;

  copyRows<D, kWarpgroup>(qs, args.q, blk, r0);
  copyRows<D, kWarpgroup>(dOs, args.dO, blk, r0);
  copyRowStats(lses, rowDots, args.lse, rowDotAll, blk, r0);

  const int i[2] = {blk.position(0), blk.position(1)};
  float dQ[D / 8][4] = {};  // (16, D)
  // This lane's cells, summed in a fixed order: sum dS * dbias/dparameter, and its share of its two
  // rows' RowTerms.
  tile::BiasGrads<double> grads;
  tile::RowTerm<float> rowTerm[2];
  const HeadsView kHead = heldHead(args.k, blk), vHead = heldHead(args.v, blk);
  auto load = [&](int c0, int buffer) {
    copyRows<D, kWarpgroup>(ks + buffer * Ld<D>::tile, kHead, blk, c0);
    copyRows<D, kWarpgroup>(vs + buffer * Ld<D>::tile, vHead, blk, c0);
  };
  pipelinedWalk<kWarpgroup>(blk, tile::Walk::Keys, load, [&](int c0, int buffer) {
    const bf16 *k = ks + buffer * Ld<D>::tile, *v = vs + buffer * Ld<D>::tile;
    const float lse2[2] = {lses[i[0] - r0], lses[i[1] - r0]};
    const float rowDot[2] = {rowDots[i[0] - r0], rowDots[i[1] - r0]};
    // (16, kBc): the scores (startLogits), then P, then dS; dP~ (cleared as dST in keyGrad)
    float dS[kBc / 8][4], dP[kBc / 8][4] = {};
    const tile::LinearTile lt = blk.linearTile(tile::Walk::Keys, c0);
    const float toBase2 = startLogits<false>(dS, blk, lt, args.scale, i, c0);
    if constexpr (kWarpgroup)
      warpgroupMultiplyTransposed<D>(dS, qs, k);
    else
      multiplyTransposed<D, kBc, Row>(dS, qStripe, k, blk.lane);
    finishLogits<false>(dS, blk, lt, args.scale, i, c0);
    if constexpr (kWarpgroup)
      issueScoreGrads<D>(dP, dOs, v);
    else
      multiplyTransposed<D, kBc, Row>(dP, dOStripe, v, blk.lane);
    if constexpr (kWarpgroup) {  // P while dP~'s product is in flight (mma.sync's: cell by cell below)
#pragma unroll
      for (int n = 0; n < kBc / 8; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) dS[n][e] = probability(dS[n][e], toBase2, lse2[e >> 1]);
      waitForScoreGrads(dP);
    }
    // dS of every cell, and with kBiasGrads each cell's share of the bias gradients through
    // addCell(r, n, e, P, dS, dP after dropout) of the cell s[n][e] of row r.
    auto forEachCell = [&](auto addCell) {
#pragma unroll
      for (int r = 0; r < 2; ++r)
#pragma unroll
        for (int m = 0; m < kBc / 16; ++m) {  // fragments 2m, 2m + 1: one dropout group per lane
          const uint32_t keep = groupKeep<kDropout>(seed, dv, blk, i[r], c0, m);
#pragma unroll
          for (int word = 0; word < 4; ++word) {
            const int n = 2 * m + (word >> 1), e = 2 * r + (word & 1);
            const bool kept = (keep >> word) & 1u;
            const float prob = kWarpgroup ? dS[n][e] : probability(dS[n][e], toBase2, lse2[r]);
            dS[n][e] = tile::scoreGrad(prob, dP[n][e], kept, keepScale<kDropout>(dv), rowDot[r]);
            if constexpr (kBiasGrads)
              addCell(r, n, e, prob, dS[n][e], tile::afterDropout(dP[n][e], kept, keepScale<kDropout>(dv)));
          }
        }
    };
    if constexpr (!kBiasGrads) {
      forEachCell([](int, int, int, float, float, float) {});
    } else if (lt.linear && !lt.hasFirstTokenCells()) {
      // Every cell is of one term, lt.term, at its LinearDistance, and three FMAs per cell instead of
      // biasCell's branches. One sum per lane for the tile's gradient and per row for the RowTerm's
      // weight, added to that term's below.
      const LinearDistance ld = linearDistance<false>(blk, lt, c0, i);
      float termGrad = 0.f, termWeight[2] = {0.f, 0.f};
      forEachCell([&](int r, int n, int e, float prob, float cellGrad, float cellDP) {
        const float distance = ld.cell(r, n, e & 1);
        termGrad -= cellGrad * distance;
        rowTerm[r].rowDot += prob * cellDP;
        termWeight[r] -= prob * distance;
      });
      if (lt.term == tile::BiasTerm::Past) {
        grads.past += termGrad;
        rowTerm[0].weight.past += termWeight[0], rowTerm[1].weight.past += termWeight[1];
      } else {
        grads.future += termGrad;
        rowTerm[0].weight.future += termWeight[0], rowTerm[1].weight.future += termWeight[1];
      }
    } else {
      // Cell by cell through biasCell: the tiles that are not linear, and the linear ones that hold
      // first-token cells (bialibi's row 0 and column 0), whose cells are of two terms.
      tile::BiasGrads<float> tileGrads;
      forEachCell([&](int r, int n, int e, float prob, float cellGrad, float cellDP) {
        const int j = c0 + fl.column(n, e);
        if (i[r] < T && j < T) {
          const tile::BiasCell cell = tile::biasCell(blk.hb, i[r], j);
          tileGrads.add(cell, cellGrad);
          rowTerm[r].add(cell, prob, cellDP);
        }
      });
      grads.past += tileGrads.past, grads.future += tileGrads.future, grads.first += tileGrads.first;
    }
    uint32_t a[kBc / 16][4];
    toA<kBc>(a, dS);
    if constexpr (kWarpgroup)
      warpgroupMultiply<D>(dQ, a, k);
    else
      multiply<kBc, D, Row>(dQ, a, k, blk.lane);  // dQ += dS K
  });
  // With kWarpgroup every warp's products read all of Q's tile: the walk's last barrier comes after
  // each warp's last wait.
  storeStripe<D>(args.dq, dQ, args.scale, qStripe, blk);

  if constexpr (kBiasGrads) {
    // Each row's whole RowTerm (its 4 lanes' shares), its correction added once, by the group's
    // first lane.
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      tile::RowTerm<float> row;
      row.rowDot = groupSum(rowTerm[r].rowDot);
      row.weight.past = groupSum(rowTerm[r].weight.past);
      row.weight.future = groupSum(rowTerm[r].weight.future);
      row.weight.first = groupSum(rowTerm[r].weight.first);
      if (fl.t == 0) tile::addRowCorrection(grads, row, rowDots[i[r] - r0]);
    }
    sumBlockGrads(grads, warpPartials, partials + (int64_t(blk.batchHead) * gridDim.x + blk.lo / kBr) * 3, blk.warp,
                  blk.lane);
  }
}

template <int D>
cudaError_t launchTwoPass(const BackwardArgs& args, const float* rowDot, double* partials, cudaStream_t stream) {
  const AttentionShape& s = args.shape;
  const Derived dv = derive(s, args.dropout);
  const bool biasGrads = wantsBiasGrads(args), dropout = dv.threshold > 0;
  const bool warpgroup = args.products == TileProducts::WarpgroupMma;
  const auto keyGrad =
      warpgroup ? (dropout ? keyGradKernel<D, true, false, false, true> : keyGradKernel<D, false, false, false, true>)
                : (dropout ? keyGradKernel<D, true, false> : keyGradKernel<D, false, false>);
  const size_t keyBytes = KeyGradSmem<D>::bytes;
  if (cudaError_t e = allowSharedMemory(keyGrad, keyBytes); e != cudaSuccess) return e;
  if (cudaError_t e = launch(keyGrad, dim3(dv.qTiles, s.H, s.B), keyBytes, stream, args, dv, rowDot,
                             static_cast<float*>(nullptr), partials);
      e != cudaSuccess)
    return e;
  const auto queryGrad =
      warpgroup
          ? (biasGrads ? (dropout ? queryGradKernel<D, true, true, true> : queryGradKernel<D, true, false, true>)
                       : (dropout ? queryGradKernel<D, false, true, true> : queryGradKernel<D, false, false, true>))
          : (biasGrads ? (dropout ? queryGradKernel<D, true, true> : queryGradKernel<D, true, false>)
                       : (dropout ? queryGradKernel<D, false, true> : queryGradKernel<D, false, false>));
  const size_t queryBytes = QueryGradSmem<D>::bytes;
  if (cudaError_t e = allowSharedMemory(queryGrad, queryBytes); e != cudaSuccess) return e;
  return launch(queryGrad, dim3(dv.qTiles, s.H, s.B), queryBytes, stream, args, dv, rowDot, partials);
}

template <int D>
cudaError_t twoPassKernelFactsOf(KernelFacts* facts) {
  FactsFiller fill{facts};
  fill.add(FactsSlot::KeyGrad, keyGradKernel<D, false, false>, "keyGrad", KeyGradSmem<D>::bytes);
  fill.add(FactsSlot::QueryGrad, queryGradKernel<D, false, false>, "queryGrad", QueryGradSmem<D>::bytes);
  fill.add(FactsSlot::QueryGradBias, queryGradKernel<D, true, false>, "queryGrad+bias", QueryGradSmem<D>::bytes);
  fill.add(FactsSlot::KeyGradWarpgroup, keyGradKernel<D, false, false, false, true>, "keyGrad+wgmma",
           KeyGradSmem<D>::bytes);
  fill.add(FactsSlot::QueryGradWarpgroup, queryGradKernel<D, false, false, true>, "queryGrad+wgmma",
           QueryGradSmem<D>::bytes);
  return fill.error;
}

}  // namespace

namespace linear_bias_passes {

cudaError_t twoPassGrads(const BackwardArgs& args, const float* rowDot, double* partials, cudaStream_t stream) {
  return args.shape.D == 64 ? launchTwoPass<64>(args, rowDot, partials, stream)
                            : launchTwoPass<128>(args, rowDot, partials, stream);
}

cudaError_t twoPassKernelFacts(int D, KernelFacts* facts) {
  return D == 64 ? twoPassKernelFactsOf<64>(facts) : twoPassKernelFactsOf<128>(facts);
}

}  // namespace linear_bias_passes
}  // namespace xtrap::cuda
