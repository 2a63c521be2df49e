#pragma once
// What the fused ALiBi-family attention kernels share (linear_bias_attention.cu has the overview):
// a block's tile and the walk over the tiles it visits, the asynchronous copies into shared
// memory, each cell's logit with its bias, and the stores and sums that end a block's work.
#include <cuda_bf16.h>
#include <cuda_pipeline_primitives.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/async_copy.cuh"
#include "cuda/core_matrix_tile.h"
#include "cuda/warpgroup_mma.cuh"
#include "model/position/linear_bias_attention.cuh"
#include "model/position/linear_bias_attention_layout.cuh"
#include "model/position/linear_bias_attention_products.cuh"
#include "model/position/linear_bias_tile.h"

namespace xtrap::cuda {
namespace {

// ---- small device helpers ----

template <typename F>  // float or double
__device__ __forceinline__ F warpSum(F x) {
  for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}
// Over the 4 lanes of a group (warp_mma.cuh's g), which hold the cells of the same two rows.
__device__ __forceinline__ float groupSum(float x) {
  x += __shfl_xor_sync(0xffffffffu, x, 1);
  return x + __shfl_xor_sync(0xffffffffu, x, 2);
}
__device__ __forceinline__ float groupMax(float x) {
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
  return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}

// The buffer at byte `offset` of the block's dynamic shared memory (the layouts above).
template <typename E>
__device__ __forceinline__ E* smemAt(size_t offset) {
  extern __shared__ __align__(128) unsigned char smem[];
  return reinterpret_cast<E*>(smem + offset);
}

// The (T, D) slice of head h in batch b.
__device__ __forceinline__ bf16* headRows(const HeadsView& view, int b, int h) {
  return static_cast<bf16*>(view.data) + b * view.sb + h * view.sh;
}

__device__ __forceinline__ tile::HeadBias headBias(const LinearBiasArgs& a, int h) {
  tile::HeadBias hb;
  hb.slopePast = a.slopePast[h];
  hb.slopeFuture = a.slopeFuture[h];
  hb.firstTokenBias = a.firstTokenBias != nullptr ? a.firstTokenBias[h] : 0.f;
  hb.futureShift = a.futureShift;
  // The head's flags, held in registers for the whole kernel: the asm statement hides where they
  // come from, so that the compiler cannot recompute them from the kernel's parameters at each
  // use, as it did in the tile loops of kernels near their register limit (the 64-bit masks'
  // variable shifts: 41 instructions a tile step in the forward with mma.sync at D 64, SASS sm_90a).
  uint32_t blockPast = uint32_t((a.blockPast >> h) & 1u);
  uint32_t blockFuture = uint32_t(a.causal || ((a.blockFuture >> h) & 1u));
  uint32_t hasFirstTokenBias = uint32_t(a.firstTokenBias != nullptr);
  asm volatile("" : "+r"(blockPast), "+r"(blockFuture), "+r"(hasFirstTokenBias));
  hb.blockPast = blockPast != 0;
  hb.blockFuture = blockFuture != 0;
  hb.hasFirstTokenBias = hasFirstTokenBias != 0;
  return hb;
}

// ---- what the three tile kernels share ----

// shorter in the tail tile, of head h in batch b; its warp owns the 16 rows
// [lo + stripe, lo + stripe + 16), and the lane two of them (FragmentLane).
struct TileBlock {
  int T, b, h;
  uint32_t batchHead;  // b * H + h: the dropout counter's head, and the head's row of (B, H, T) statistics
  int lo, hi;
  int warp, lane, stripe;
  FragmentLane fl;
  tile::HeadBias hb;
  // This head's tile bounds and walks (NegligibleTiles), or nullptr: no pair is negligible.
  const tile::TileBound* bounds;
  const TileWalks* walks;
  float scale;

  // This head's (T, D) slice of a (B, H, T, D) view.
  __device__ bf16* rows(const HeadsView& view) const { return headRows(view, b, h); }
  // This head's (T) row of a (B, H, T) buffer of row statistics.
  template <typename F>
  __device__ F* stats(F* all) const {
    return all + int64_t(batchHead) * T;
  }
  // Whether the pair with the tile of the other axis that starts at t0 has a cell that is not
  // blocked (tile::visitsTile).
  __device__ bool open(tile::Walk walk, int t0) const { return tile::visitsTile(hb, walk, lo, t0); }
  // Whether that pair is open and not negligible (tile::negligibleTile, by the tiles' bounds).
  __device__ bool visits(tile::Walk walk, int t0) const {
    if (!open(walk, t0)) return false;
    if (bounds == nullptr) return true;
    const tile::TileBound &own = bounds[lo / kBr], &other = bounds[t0 / kBr];
    return walk == tile::Walk::Keys ? !tile::negligibleTile(hb, lo, t0, kBr, scale, own, other)
                                    : !tile::negligibleTile(hb, t0, lo, kBr, scale, other, own);
  }
  // The position of this lane's row r (0, 1) in [0, T): a query (a key in keyGrad).
  __device__ int position(int r) const { return lo + stripe + fl.row(2 * r); }
  // Column minus row of this lane's cell c (0, 1) of fragment n in the row at `position`, the
  // columns starting at t0: j - i (i - j in keyGrad's transposed tiles), exact in fp32 (below 2^24).
  __device__ float columnMinusRow(int t0, int position, int n, int c) const {
    return float(t0 + 2 * fl.t - position) + float(8 * n + c);
  }
  // The first tile of the other axis that the block visits (the last with fromEnd; there is one:
  // the diagonal's pair is never blocked nor negligible). This warp tests 32 tiles at once, lane l
  // the l-th from where it stands, and takes the nearest by a min over its lanes: negligible pairs
  // can be hundreds in a row (the far part of every causal walk at 16k), each test a load of their
  // bounds. Every lane of the warp calls it (warp shuffles).
  __device__ int scanVisits(tile::Walk walk, bool fromEnd) const {
    const int last = (T - 1) / kBr * kBr, step = fromEnd ? -kBr : kBr;
    for (int base = fromEnd ? last : 0; base >= 0 && base <= last; base += 32 * step) {
      const int mine = base + lane * step;
      float nearest = mine >= 0 && mine <= last && visits(walk, mine) ? float(lane) : 32.f;
      for (int o = 16; o > 0; o >>= 1) nearest = fminf(nearest, __shfl_xor_sync(0xffffffffu, nearest, o));
      if (nearest < 32.f) return base + int(nearest) * step;
    }
    return lo;  // not reached: the diagonal's tile
  }
  // tile::linearTile of the pair with the tile of the other axis that starts at t0.
  __device__ tile::LinearTile linearTile(tile::Walk walk, int t0) const {
    return walk == tile::Walk::Keys ? tile::linearTile(hb, lo, t0, kBr, T) : tile::linearTile(hb, t0, lo, kBr, T);
  }
};

// The block of tile `tile` (tileBlock below); tileBounds: NegligibleTiles' buffer or nullptr.
__device__ TileBlock tileBlockAt(const AttentionShape& shape, const LinearBiasArgs& bias, int tile,
                                 const float* tileBounds, float scale) {
  TileBlock blk;
  blk.T = shape.T, blk.b = blockIdx.z, blk.h = blockIdx.y;
  blk.batchHead = uint32_t(blk.b * shape.H + blk.h);
  blk.hb = headBias(bias, blk.h);
  const NegligibleTiles negligible{tileBounds, int64_t(shape.B) * shape.H * int(gridDim.x)};
  blk.bounds = tileBounds ? negligible.bounds() + int64_t(blk.batchHead) * gridDim.x : nullptr;
  blk.walks = tileBounds ? negligible.walks() + int64_t(blk.batchHead) * gridDim.x : nullptr;
  blk.scale = scale;
  blk.lo = tile * kBr, blk.hi = min(shape.T, blk.lo + kBr);  // kBr == kBc: keyGrad's key tiles too
  blk.warp = threadIdx.x / 32, blk.lane = threadIdx.x % 32, blk.stripe = blk.warp * kStripe;
  blk.fl = fragmentLane(blk.lane);
  return blk;
}

// The block of a kernel walking `walk` (forward and queryGrad: keys; keyGrad: queries). Blocks
// start in blockIdx order, x fastest, and a head that blocks one side gives its tiles walks of 1 to
// ceil(T / 64) tiles: longest first, so that the grid's last wave holds short walks rather than one
// long walk started late. Blocking the future (causal), query tile x walks x + 1 key tiles;
// blocking the past, key tile x is walked by x + 1 query tiles: both in reverse (negligible pairs
// cut the longest walks short, most at the far ends).
__device__ TileBlock tileBlock(const AttentionShape& shape, const LinearBiasArgs& bias, tile::Walk walk,
                               const float* tileBounds, float scale) {
  const tile::HeadBias hb = headBias(bias, int(blockIdx.y));
  const bool shortestFirst = tile::blocksSide(hb, walk, false);
  const int tile = shortestFirst ? int(gridDim.x) - 1 - int(blockIdx.x) : int(blockIdx.x);
  return tileBlockAt(shape, bias, tile, tileBounds, scale);
}

// `view` narrowed to the block's head (data at the head's rows, sb and sh 0) for the copies of a
// walk, the pointer held in registers through it: the asm statement hides where it comes from (as
// headBias does for the flags), where the compiler recomputed it (two 64-bit products a tensor) at
// each step of the loops near their register limit.
__device__ __forceinline__ HeadsView heldHead(const HeadsView& view, const TileBlock& blk) {
  HeadsView head = view;
  head.data = blk.rows(view);
  head.sb = head.sh = 0;
  asm volatile("" : "+l"(head.data));
  return head;
}

// Rows [row0, row0 + kBr) of this head's (T, D) slice of `view` into a shared tile, zeros past T
// (tail tiles): this thread's share of 16-byte asynchronous copies (async::copy), which land when
// the thread waits for them (__pipeline_wait_prior) and are every thread's after a barrier after
// that. The tile's rows are Ld<D>::rows elements apart (ldmatrix's layout), or with kCore it is a
// core-matrix tile (core_matrix_tile.h: the warpgroup MMA's layout).
// Warp w copies rows 8w .. 8w + 7 and 32 further, lane l row l % 8 of them, its chunks (8 columns,
// 16 bytes) l / 8 and 4, 8 ... further: one copy of a warp is 8 rows by 4 chunks, 64 contiguous
// bytes of each row, whose 8-lane phases write 8 different bank quads in both layouts (one core
// matrix; 8 rows whose strides of 144 or 272 bytes fall in different quads). A thread's copies of
// one row then lie 64 bytes apart in global memory, a constant the copy instruction adds itself,
// where copies of rows a runtime stride apart took a 64-bit add each (two instructions, SASS
// sm_90a): one add a tile at D 64 instead of three, at D 128 one instead of seven. Its loops are
// unrolled: a loop over a piece index from threadIdx.x (whose bound the compiler cannot know) cost
// some 15 integer instructions and a branch per piece (the PTX's remainder loop). A whole tile
// (all but a sequence's last) takes no test and no fill, where a tail tile's rows take some ten PTX
// instructions each (the row's test, and the selected address and fill).
// Measured (ncu on an H100, results/gpu.md, 2026-11-27): a warp's copy into ldmatrix's layout takes
// 15 shared-memory wavefronts and 24 L2 sectors, into the core-matrix one 32 and 32, where its 512
// bytes need 4 and 16: as if each global sector were written to shared memory on its own (the
// core-matrix layout puts a sector's two chunks 1 KiB apart).
template <int D, bool kCore = false>
__device__ __forceinline__ void copyRows(bf16* tile, const HeadsView& view, const TileBlock& blk, int row0) {
  constexpr int kChunkSteps = D / 32, kRowSteps = kBr / 32;  // a thread's chunks and rows
  static_assert(kThreads == 128 && D % 32 == 0 && kBr % 32 == 0, "4 warps of 8 rows by 4 chunks");
  const unsigned lane = threadIdx.x % 32, warp = threadIdx.x / 32;  // unsigned: shifts, no sign to fix
  const int r0 = int(lane % 8 + 8 * warp), col = int(lane / 8) * 8;
  const bf16* first = blk.rows(view) + col;  // row 0: the address of a copy past T, which reads nothing
  const bf16* from = first + int64_t(row0 + r0) * view.st;
  const int64_t rowStep = int64_t(32) * view.st;
  bf16* to = kCore ? tile + core::offset(r0, col) : tile + r0 * Ld<D>::rows + col;
  // 32 rows further, 32 columns (4 chunks) further: in either layout a constant of elements.
  constexpr int kRowStepElements = kCore ? core::offset(32, 0) : 32 * Ld<D>::rows;
  constexpr int kChunkStepElements = kCore ? core::offset(0, 32) : 32;
  if (row0 + kBr <= blk.T) {  // a whole tile (the same for the whole block): no test, no fill
#pragma unroll
    for (int r = 0; r < kRowSteps; ++r)
#pragma unroll
      for (int c = 0; c < kChunkSteps; ++c)
        async::copy<16>(to + r * kRowStepElements + c * kChunkStepElements, from + r * rowStep + 32 * c, 16);
    return;
  }
#pragma unroll
  for (int r = 0; r < kRowSteps; ++r) {
    const bool inside = row0 + r0 + 32 * r < blk.T;
#pragma unroll
    for (int c = 0; c < kChunkSteps; ++c)
      async::copy<16>(to + r * kRowStepElements + c * kChunkStepElements, inside ? from + r * rowStep + 32 * c : first,
                      inside ? 16 : 0);
  }
}

// A (B, H, T) row statistic of query rows [r0, r0 + kBr) into shared memory as copyRows does, zeros
// past T (the logits of padding rows are -inf, so their P is 0 whatever their statistics): thread x
// of the first kBr copies row x, 4 bytes (a row of statistics starts 16-byte aligned only where T
// is a multiple of 4). A loop over x from threadIdx.x, whose trip count the compiler cannot know,
// took some 80 instructions per statistic in keyGrad's walk, which copies two every tile pair
// (SASS sm_90a).
__device__ __forceinline__ void copyRowStat(float* tile, const float* all, const TileBlock& blk, int r0) {
  static_assert(kThreads >= kBr, "a thread per row");
  const int x = threadIdx.x;
  if (x >= kBr) return;  // whole warps
  const bool inside = r0 + x < blk.T;
  async::copy<4>(tile + x, blk.stats(all) + (inside ? r0 + x : 0), inside ? 4 : 0);
}

// Their lse and D_i.
__device__ void copyRowStats(float* lseTile, float* rowDotTile, const float* lseAll, const float* rowDotAll,
                             const TileBlock& blk, int r0) {
  copyRowStat(lseTile, lseAll, blk, r0);
  copyRowStat(rowDotTile, rowDotAll, blk, r0);
}

// The block's walk over the tiles of the other axis it visits (tile::Walk): from the first to the
// last that is open and not negligible (its TileWalks), the open ones between them, double-buffered
// (between the two, pairs are rarely negligible: ALiBi's bias falls away from the diagonal on each
// side; one computed gives what skipping it would, and the loop stays free of the bounds' loads
// and of the registers their tests take): load(t0, buffer) queues the copies of the tile at t0
// into buffer 0 or 1, work(t0, buffer) computes on it, while the next tile's copies are in flight.
// Copies queued before the walk (the block's own tile) land with the first tile's. kAsyncProxy: the
// work reads the tiles with the warpgroup MMA, through the async proxy (warpgroup_mma.cuh).
// kDescending: from the last tile to the first (the forward's order, see forwardKernel).
template <bool kAsyncProxy = false, bool kDescending = false, typename Load, typename Work>
__device__ __forceinline__ void pipelinedWalk(const TileBlock& blk, tile::Walk walk, Load load, Work work) {
  int begin = 0, end = blk.T;  // without walks: every open pair
  if (blk.walks != nullptr) {
    const TileWalks w = blk.walks[blk.lo / kBr];
    begin = walk == tile::Walk::Keys ? w.keysBegin : w.queriesBegin;
    end = walk == tile::Walk::Keys ? w.keysEnd : w.queriesEnd;
  }
  // The open tiles among them, from the first (there is one: the diagonal's cells are never
  // blocked) to the last in the walk's order; after the last, a tile outside the walk.
  const tile::OpenTiles open = tile::openTiles(blk.hb, walk, blk.lo, kBr, begin, end);
  auto after = [&](int t) { return kDescending ? open.previous(t, kBr) : open.next(t, kBr); };
  auto inWalk = [&](int t) { return kDescending ? t >= 0 : open.upTo(t); };
  int t0 = kDescending ? open.last : open.lowest();
  load(t0, 0);
  __pipeline_commit();
  for (int buffer = 0; inWalk(t0); buffer ^= 1) {
    const int next = after(t0);
    if (inWalk(next)) load(next, buffer ^ 1);
    __pipeline_commit();
    __pipeline_wait_prior(1);  // this thread's copies of tile t0 have landed
    if constexpr (kAsyncProxy) wgmma::fenceSharedWrites();
    __syncthreads();  // and every thread's
    work(t0, buffer);
    __syncthreads();  // every warp is done with `buffer` before the next step refills it
    t0 = next;
  }
}

// A linear tile's bias / scale, the start of its accumulators: per row, then per cell (n, c) of
// the row. startLogits and finishLogits compute it through here alike, bit for bit.
struct ScaledLinearBias {
  float slope, offset;  // slope' and offset' (startLogits, below)
  __device__ float row(const TileBlock& blk, int t0, int position) const {
    return fmaf(slope, blk.columnMinusRow(t0, position, 0, 0), offset);
  }
  __device__ float cell(float rowBias, int n, int c) const { return fmaf(slope, float(8 * n + c), rowBias); }
};
template <bool kTransposed>
__device__ __forceinline__ ScaledLinearBias scaledLinearBias(const tile::LinearTile& lt, float scale) {
  // 1 / scale is the same in every tile of the walk: the compiler takes it out of the loop, where
  // a division of each tile's slope and offset by scale would be two divisions a tile.
  const float invScale = 1.f / scale;
  return {(kTransposed ? -lt.slope : lt.slope) * invScale, lt.offset * invScale};
}

// A (16, 64) score tile of this lane's warp, in two steps around its product, whose base-2 logits
// (kLog2e (scale q.k + bias)) are then toBase2 times its values: rows at positions rows[0] and
// rows[1] (FragmentLane), columns at t0 + column(n, e); queries by keys, or with kTransposed keys
// by queries (keyGrad's S^T). lt is the pair's blk.linearTile. On a linear tile (most pairs of a
// long sequence) the accumulators start at bias / scale (startLogits), so that the product leaves
// q.k + bias / scale and toBase2 = kLog2e scale, which the callers fold into the FMA of their
// exponential: one FMA a cell for the bias. Elsewhere they start at 0 and finishLogits makes the
// dot products base-2 logits (tile::logit per cell), toBase2 = 1.
//
// startLogits: the accumulators' start; returns toBase2. bias / scale = slope' (j - i) + offset'
// (slope' = slope / scale, offset' = offset / scale) with j - i = kSign (column - row): per row
// slope' (t0 + 2t - row) + offset' once (exact integers below 2^24 in fp32), then per cell
// slope' (8n + c), whose factor is a constant of the unrolled loop, added in one FMA.
template <bool kTransposed>
__device__ __forceinline__ float startLogits(float (&s)[kBc / 8][4], const TileBlock& blk, const tile::LinearTile& lt,
                                             float scale, const int (&rows)[2], int t0) {
  if (!lt.linear) {
#pragma unroll
    for (int n = 0; n < kBc / 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) s[n][e] = 0.f;
    return 1.f;
  }
  const ScaledLinearBias bias = scaledLinearBias<kTransposed>(lt, scale);
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const float rowBias = bias.row(blk, t0, rows[r]);
#pragma unroll
    for (int n = 0; n < kBc / 8; ++n)
#pragma unroll
      for (int c = 0; c < 2; ++c) s[n][2 * r + c] = bias.cell(rowBias, n, c);
  }
  return kLog2e * scale;
}

// finishLogits, after the product: on a masked linear tile (the diagonal band of a head that
// blocks one side) the cells of the blocked side become -inf (column - row > 0 is j > i; i > j
// transposed); on other tiles than linear ones every cell becomes its base-2 logit.
template <bool kTransposed>
__device__ __forceinline__ void finishLogits(float (&s)[kBc / 8][4], const TileBlock& blk, const tile::LinearTile& lt,
                                             float scale, const int (&rows)[2], int t0) {
  if (lt.linear && lt.hasFirstTokenCells()) {
    // The first-token cells (i = 0 or j = 0: the same test transposed) hold the term's bias / scale
    // (startLogits' value, recomputed the same way) + q.k, which becomes firstTokenBias / scale +
    // q.k: rounded as a linear cell's logit is, to the float spacing of that start. Column 0 is
    // element c = 0 of fragment 0 in lane t = 0's two rows. Such a tile is never masked. Done here,
    // not in startLogits, where the forward at D 64 spilled (12 bytes over its 128 registers).
    const ScaledLinearBias bias = scaledLinearBias<kTransposed>(lt, scale);
    const float first = blk.hb.firstTokenBias * (1.f / scale);
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const float rowBias = bias.row(blk, t0, rows[r]);
      if (t0 == 0 && blk.fl.t == 0) s[0][2 * r] += first - rowBias;  // bias.cell(rowBias, 0, 0)
      if (rows[r] == 0)
#pragma unroll
        for (int n = 0; n < kBc / 8; ++n)
#pragma unroll
          for (int c = 0; c < 2; ++c) s[n][2 * r + c] += first - bias.cell(rowBias, n, c);
    }
    return;
  }
  if (lt.linear) {
    const bool maskAbove = kTransposed ? lt.maskPast : lt.maskFuture,
               maskBelow = kTransposed ? lt.maskFuture : lt.maskPast;
    if (!maskAbove && !maskBelow) return;
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const float rowOffset = blk.columnMinusRow(t0, rows[r], 0, 0);
#pragma unroll
      for (int n = 0; n < kBc / 8; ++n)
#pragma unroll
        for (int c = 0; c < 2; ++c) {
          const float columnMinusRow = rowOffset + float(8 * n + c);
          if (maskAbove ? columnMinusRow > 0.f : columnMinusRow < 0.f) s[n][2 * r + c] = -INFINITY;
        }
    }
    return;
  }
#pragma unroll
  for (int n = 0; n < kBc / 8; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int row = rows[e >> 1], column = t0 + blk.fl.column(n, e);
      s[n][e] = kLog2e * (kTransposed ? tile::logit(blk.hb, s[n][e], scale, column, row, blk.T)
                                      : tile::logit(blk.hb, s[n][e], scale, row, column, blk.T));
    }
}

// The distance of a linear tile's cells in its term's gradient (tile::biasCell's distance),
// lt.distanceSign (j - i) - lt.distanceShift: per row once, then per cell distanceSign (8n + c)
// added in one FMA (small integers and halves: exact). Rows at positions rows[0] and rows[1],
// columns from t0 (FragmentLane); kTransposed: keyGrad's tiles, rows keys and columns queries.
struct LinearDistance {
  float sign, rowDistance[2];
  __device__ float cell(int r, int n, int c) const { return fmaf(sign, float(8 * n + c), rowDistance[r]); }
};
template <bool kTransposed>
__device__ __forceinline__ LinearDistance linearDistance(const TileBlock& blk, const tile::LinearTile& lt, int t0,
                                                         const int (&rows)[2]) {
  const float sign = kTransposed ? -lt.distanceSign : lt.distanceSign;  // columnMinusRow is i - j transposed
  return {sign,
          {fmaf(sign, blk.columnMinusRow(t0, rows[0], 0, 0), -lt.distanceShift),
           fmaf(sign, blk.columnMinusRow(t0, rows[1], 0, 0), -lt.distanceShift)}};
}

// Dropout's keep bits of this lane's 4 keys of row i in fragments 2m and 2m + 1 of a (16, kBc) tile
// of keys from c0, one group (tile::dropoutGroup): bit w for element [2m + w / 2][2r + w % 2].
template <bool kDropout>
__device__ __forceinline__ uint32_t groupKeep(uint64_t seed, const Derived& dv, const TileBlock& blk, int i, int c0,
                                              int m) {
  return keepGroup<kDropout>(seed, dv, blk.batchHead, i, tile::dropoutGroup(c0 + 16 * m) + blk.fl.t);
}

// This warp's 16 rows of a (16, D) fp32 accumulator, times factor, as bf16 rows of this head's
// slice of `view` (rows past T left out). Staged through `stage`, the warp's own 16 rows of a
// shared tile that no other warp reads, then written 16 bytes at a time.
template <int D>
__device__ void storeStripe(const HeadsView& view, const float (&acc)[D / 8][4], float factor, bf16* stage,
                            const TileBlock& blk) {
  const FragmentLane& fl = blk.fl;
  // The stage's rows were last read by this warp's ldmatrix, which all 32 lanes execute together:
  // this barrier states that order rather than relying on it (the emulated test cannot tell).
  __syncwarp();
#pragma unroll
  for (int n = 0; n < D / 8; ++n)
#pragma unroll
    for (int r = 0; r < 2; ++r)
      *reinterpret_cast<uint32_t*>(stage + fl.row(2 * r) * Ld<D>::rows + fl.column(n, 0)) =
          mma::packBf16(acc[n][2 * r] * factor, acc[n][2 * r + 1] * factor);
  __syncwarp();
  constexpr int kPieces = D / 8;
  bf16* rows = blk.rows(view);
  for (int x = blk.lane; x < kStripe * kPieces; x += 32) {
    const int r = x / kPieces, col = (x % kPieces) * 8, position = blk.lo + blk.stripe + r;
    if (position < blk.T)
      *reinterpret_cast<uint4*>(rows + position * view.st + col) =
          *reinterpret_cast<const uint4*>(stage + r * Ld<D>::rows + col);
  }
}

// This lane's three bias-gradient sums, summed over the block (lanes, then warps, in a fixed order)
// into out[3] by threads 0-2. warpPartials: (kWarps, 3) doubles of shared memory.
__device__ void sumBlockGrads(tile::BiasGrads<double> grads, double* warpPartials, double* out, int warp, int lane) {
  grads.past = warpSum(grads.past), grads.future = warpSum(grads.future), grads.first = warpSum(grads.first);
  if (lane == 0) {
    warpPartials[warp * 3 + 0] = grads.past;
    warpPartials[warp * 3 + 1] = grads.future;
    warpPartials[warp * 3 + 2] = grads.first;
  }
  __syncthreads();
  if (threadIdx.x < 3) {
    double sum = 0.0;
    for (int w = 0; w < kWarps; ++w) sum += warpPartials[w * 3 + threadIdx.x];
    out[threadIdx.x] = sum;
  }
}

}  // namespace
}  // namespace xtrap::cuda
