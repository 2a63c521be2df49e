// Fused attention for the ALiBi family (linear_bias_attention.cuh): forward and backward.
//
// B = batch, H = heads, T = sequence length, D = head dimension (64 or 128).
// A query tile is kBr = 64 rows, a key tile kBc = 64 columns; a thread block has 4 warps.
//
// Forward, one block per (query tile, head, batch), FlashAttention-2's loop: for every key tile
// that is not fully blocked, S = scale * Q K^T (WMMA bf16 -> fp32, staged in shared memory), the
// bias of each cell computed from the head's spec (linear_bias_tile.h), online softmax with the
// running row max m and sum l in fp32, O = O * exp(m_old - m_new) + P V. At the end
// O /= l and the row's log-sum-exp m + log l is saved: it is all the backward needs of the softmax.
//
// Backward, FlashAttention-2's equations with P recomputed from the saved log-sum-exp:
//   P = exp(S + bias - lse), D_i = rowsum(dO o O), dP = dO V^T (masked by the same dropout),
//   dS = P o (dP - D_i), dV = P~^T dO, dK = scale dS^T Q, dQ = scale dS K, dBias = dS.
// Three kernels: rowDot (D_i), keyGrad (one block per key tile: dK, dV summed over query tiles in
// shared memory) and queryGrad (one block per query tile: dQ summed over key tiles, and the bias
// gradients). dQ gets its own pass instead of FlashAttention-2's fp32 atomicAdd into a dQ
// accumulator: every output is summed by one block in a fixed order, so the backward is
// deterministic, at the price of recomputing S and dP once more (7 tile products per tile pair
// instead of 5). The bias gradients dslopePast = sum dS * (-(i - j)), dslopeFuture =
// sum dS * (-(j - i - shift)), dfirstTokenBias = sum dS over first-token cells are summed per
// lane in a fixed cell order, corrected for the rounding of D_i by each row's exact sum of P o dP
// (tile::RowTerm), then summed across lanes and warps in a fixed order, written per block to a
// buffer, and summed over (batch, query tile) in a fixed order by one thread per (head,
// parameter): no float atomics anywhere.
//
// Dropout: Philox4x32-10 keyed by the seed, one counter per (batch*H + head, row, 4 keys)
// (linear_bias_tile.h), so the backward regenerates the forward's mask cell by cell; a lane draws
// each of its 4-key groups once (tile::dropoutKeepBits).
//
// What would make it faster (correctness and clarity first here): keep S and O in registers with
// mma.sync fragments of known layout instead of staging through shared memory (FlashAttention-2),
// cp.async / TMA double-buffering of the K and V tiles, exp2 with log2(e) folded into the scale,
// a single backward pass with ordered dQ accumulation (FlashAttention-2's deterministic mode), and on H100 warpgroup
// wgmma (FA3).
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <mma.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "model/position/linear_bias_attention.cuh"
#include "model/position/linear_bias_tile.h"

namespace xtrap::cuda {
namespace {

using bf16 = __nv_bfloat16;
namespace wmma = nvcuda::wmma;

constexpr int kBr = 64;    // query rows per tile
constexpr int kBc = 64;    // key columns per tile
constexpr int kWarps = 4;  // each warp owns 16 query rows, or 16 keys in keyGrad's products
constexpr int kThreads = 32 * kWarps;
constexpr int kStripe = kBr / kWarps;  // 16: one WMMA fragment's height
constexpr int kPadHalf = 8;            // bf16 row padding (against bank conflicts; rows stay 16-byte aligned)
constexpr int kPadFloat = 4;           // fp32 row padding
static_assert(kBr == kBc, "keyGrad's key stripes reuse kStripe");

constexpr size_t align128(size_t n) { return (n + 127) / 128 * 128; }
constexpr int ceilDiv(int a, int b) { return (a + b - 1) / b; }

using FragA = wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::row_major>;
using FragAT = wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::col_major>;  // A read transposed
using FragB = wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::row_major>;
using FragBT = wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::col_major>;  // B read transposed
using FragC = wmma::fragment<wmma::accumulator, 16, 16, 16, float>;

// Shared-memory row lengths (elements) of the tiles.
template <int D>
struct Ld {
  static constexpr int rows = D + kPadHalf;  // Q, K, V, dO tiles: bf16 (64, D)
  static constexpr int s = kBc + kPadFloat;  // S / dP tile: fp32 (64, 64)
  static constexpr int p = kBc + kPadHalf;   // P / dS tile: bf16 (64, 64)
  static constexpr int acc = D + kPadFloat;  // O / dQ / dK / dV accumulators: fp32 (64, D)
  static constexpr size_t rowsBytes = align128(size_t(kBr) * rows * sizeof(bf16));
  static constexpr size_t sBytes = align128(size_t(kBr) * s * sizeof(float));
  static constexpr size_t pBytes = align128(size_t(kBr) * p * sizeof(bf16));
  static constexpr size_t accBytes = align128(size_t(kBr) * acc * sizeof(float));
  static constexpr size_t statBytes = align128(kBr * sizeof(float));
};

// Forward: Q, K, V | S | P | O.  D=64: 70 KiB, D=128: 110 KiB (two blocks per H100 SM).
template <int D>
struct ForwardSmem {
  static constexpr size_t q = 0, k = q + Ld<D>::rowsBytes, v = k + Ld<D>::rowsBytes, s = v + Ld<D>::rowsBytes,
                          p = s + Ld<D>::sBytes, o = p + Ld<D>::pBytes, bytes = o + Ld<D>::accBytes;
};
// keyGrad: K, V, Q, dO | S/dP | P~, dS | dK, dV | lse, D_i.  D=64: 106 KiB, D=128: 170 KiB (the H100
// allows 227 KiB per block, the A100 163 KiB: there D=128 backward fails at launch).
template <int D>
struct KeyGradSmem {
  static constexpr size_t k = 0, v = k + Ld<D>::rowsBytes, q = v + Ld<D>::rowsBytes, dO = q + Ld<D>::rowsBytes,
                          s = dO + Ld<D>::rowsBytes, p = s + Ld<D>::sBytes, dS = p + Ld<D>::pBytes,
                          dK = dS + Ld<D>::pBytes, dV = dK + Ld<D>::accBytes, lse = dV + Ld<D>::accBytes,
                          rowDot = lse + Ld<D>::statBytes, bytes = rowDot + Ld<D>::statBytes;
};
// queryGrad: Q, dO, K, V | S/dP | dS | dQ | lse, D_i | warp partials.  D=64: 80 KiB, D=128: 128 KiB.
template <int D>
struct QueryGradSmem {
  static constexpr size_t q = 0, dO = q + Ld<D>::rowsBytes, k = dO + Ld<D>::rowsBytes, v = k + Ld<D>::rowsBytes,
                          s = v + Ld<D>::rowsBytes, dS = s + Ld<D>::sBytes, dQ = dS + Ld<D>::pBytes,
                          lse = dQ + Ld<D>::accBytes, rowDot = lse + Ld<D>::statBytes,
                          partial = rowDot + Ld<D>::statBytes, bytes = partial + align128(kWarps * 3 * sizeof(double));
};

// The most shared memory any of the kernels for head dimension D asks for.
template <int D>
constexpr size_t largestSmem() {
  return std::max({ForwardSmem<D>::bytes, KeyGradSmem<D>::bytes, QueryGradSmem<D>::bytes});
}

// The H100 gives a block up to 227 KiB of shared memory.
static_assert(largestSmem<128>() <= 227 * 1024, "a tile layout outgrew the H100's shared memory");

// What every kernel gets besides the caller's arguments.
struct Derived {
  uint32_t threshold = 0;  // dropout threshold on 24-bit draws (0: no dropout)
  float keepScale = 1.f;   // 1 / (1 - p)
  int qTiles = 0;          // ceil(T / kBr)
};

// ---- small device helpers ----

__device__ __forceinline__ float warpSum(float x) {
  for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}
__device__ __forceinline__ double warpSum(double x) {
  for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
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
  hb.hasFirstTokenBias = a.firstTokenBias != nullptr;
  hb.firstTokenBias = hb.hasFirstTokenBias ? a.firstTokenBias[h] : 0.f;
  hb.futureShift = a.futureShift;
  hb.blockPast = (a.blockPast >> h) & 1u;
  hb.blockFuture = a.causal || ((a.blockFuture >> h) & 1u);
  return hb;
}

// ---- what the three tile kernels share ----

// Where a block of forwardKernel, keyGradKernel or queryGradKernel works. Their grids are
// (ceil(T / 64), H, B): the block owns the tile [lo, hi) of [0, T) (query rows; keys in keyGrad),
// shorter than 64 in the tail tile, of head h in batch b; its warp owns the 16 rows
// [lo + stripe, lo + stripe + 16) of that tile.
struct TileBlock {
  int T, b, h;
  uint32_t batchHead;  // b * H + h: the dropout counter's head, and the head's row of (B, H, T) statistics
  int lo, hi;
  int warp, lane, stripe;
  tile::HeadBias hb;

  // This head's (T, D) slice of a (B, H, T, D) view.
  __device__ bf16* rows(const HeadsView& view) const { return headRows(view, b, h); }
  // This head's (T) row of a (B, H, T) buffer of row statistics.
  template <typename F>
  __device__ F* stats(F* all) const {
    return all + int64_t(batchHead) * T;
  }
  // Whether the tile loop visits the tile of the other axis that starts at t0 (tile::visitsTile):
  // the same answer for the whole block, so skipping keeps the __syncthreads aligned.
  __device__ bool visits(tile::Walk walk, int t0) const {
    return tile::visitsTile(hb, walk, lo, hi, t0, walk == tile::Walk::Keys ? kBc : kBr, T);
  }
};

__device__ TileBlock tileBlock(const AttentionShape& shape, const LinearBiasArgs& bias) {
  TileBlock blk;
  blk.T = shape.T, blk.b = blockIdx.z, blk.h = blockIdx.y;
  blk.batchHead = uint32_t(blk.b * shape.H + blk.h);
  blk.lo = blockIdx.x * kBr, blk.hi = min(shape.T, blk.lo + kBr);  // kBr == kBc: keyGrad's key tiles too
  blk.warp = threadIdx.x / 32, blk.lane = threadIdx.x % 32, blk.stripe = blk.warp * kStripe;
  blk.hb = headBias(bias, blk.h);
  return blk;
}

// Rows [row0, row0 + kBr) of this head's (T, D) slice of `view` into a shared tile, zeros past T
// (tail tiles). 16-byte loads; every thread of the block takes part.
template <int D>
__device__ void loadRows(bf16* tile, const HeadsView& view, const TileBlock& blk, int row0) {
  constexpr int kPieces = D / 8;
  const bf16* rows = blk.rows(view);
  for (int x = threadIdx.x; x < kBr * kPieces; x += kThreads) {
    int r = x / kPieces, col = (x % kPieces) * 8;
    uint4 piece = make_uint4(0u, 0u, 0u, 0u);
    if (row0 + r < blk.T) piece = *reinterpret_cast<const uint4*>(rows + (row0 + r) * view.st + col);
    *reinterpret_cast<uint4*>(tile + r * Ld<D>::rows + col) = piece;
  }
}

// One step of the key-tile loop of forwardKernel and queryGradKernel: K and V rows [c0, c0 + kBc)
// into shared memory.
template <int D, typename Args>
__device__ void loadKeyTile(bf16* ks, bf16* vs, const Args& args, const TileBlock& blk, int c0) {
  __syncthreads();  // every warp is done with the previous K and V
  loadRows<D>(ks, args.k, blk, c0);
  loadRows<D>(vs, args.v, blk, c0);
  __syncthreads();
}

// Which cells of its warp's 16 rows a lane owns, wherever the kernels work cell by cell (the
// forward's softmax, the backward's P and dS): row `row` of the tile (stripe + lane % 16) and half
// `half` (lane / 16) of its 64 key columns, or of its D accumulator columns. A row's max, sum or
// any per-row total then takes one shuffle with lane ^ 16 instead of a warp reduction per row,
// and the lane's 32 keys share 8 dropout draws (tile::dropoutKeepBits). The lane walks its
// columns rotated by `skew`: a row of S (68 floats) or of the O accumulator (D + 4) starts 4
// banks after the previous one, so rows r and r + 8, and the two halves, would start in the same
// bank; with the skew the 32 lanes' reads fall in 32 banks.
struct HalfRow {
  int row, half, skew;

  // The c-th (c < 32) key column of this lane's half.
  __device__ int column(int c) const { return half * 32 + ((c + skew) & 31); }
  // Bit k of dropoutKeepBits for this lane's keys: its c-th column's.
  __device__ bool kept(uint32_t keepBits, int c) const { return (keepBits >> ((c + skew) & 31)) & 1u; }
};

__device__ HalfRow halfRow(const TileBlock& blk) {
  const int r = blk.lane & 15, half = blk.lane >> 4;
  return {blk.stripe + r, half, (r >> 3) + 2 * half};
}

// This lane's half of its row of the (64, D) fp32 accumulator tile, times factor.
template <int D>
__device__ __forceinline__ void scaleHalfRow(float* acc, const HalfRow& mine, float factor) {
  float* row = acc + mine.row * Ld<D>::acc + mine.half * (D / 2);
#pragma unroll
  for (int d = 0; d < D / 2; ++d) row[(d & ~31) | ((d + mine.skew) & 31)] *= factor;
}

// One warp: out (16, kBc) fp32 = a (16, D) x b (kBc, D)^T, both bf16 in shared memory.
// S = Q K^T and dP = dO V^T.
template <int D>
__device__ void stripeTimesTransposed(float* out, const bf16* a, const bf16* b) {
  FragC acc[kBc / 16];
#pragma unroll
  for (int n = 0; n < kBc / 16; ++n) wmma::fill_fragment(acc[n], 0.f);
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk) {
    FragA fa;
    wmma::load_matrix_sync(fa, a + kk * 16, Ld<D>::rows);
#pragma unroll
    for (int n = 0; n < kBc / 16; ++n) {
      FragBT fb;  // b^T as a column-major (D, kBc) matrix
      wmma::load_matrix_sync(fb, b + n * 16 * Ld<D>::rows + kk * 16, Ld<D>::rows);
      wmma::mma_sync(acc[n], fa, fb, acc[n]);
    }
  }
#pragma unroll
  for (int n = 0; n < kBc / 16; ++n) wmma::store_matrix_sync(out + n * 16, acc[n], Ld<D>::s, wmma::mem_row_major);
}

// One warp: out (16, D) fp32 += a (16, 64) x b (64, D), a bf16 with row length Ld::p, b bf16 rows.
// kTransposedA: a is read as the transpose of a (64, 16) column block (P~^T dO, dS^T Q).
// O += P V, dQ += dS K, dV += P~^T dO, dK += dS^T Q.
template <int D, bool kTransposedA>
__device__ void stripeAccumulate(float* out, const bf16* a, const bf16* b) {
  using FragAny = typename std::conditional<kTransposedA, FragAT, FragA>::type;
  FragAny fa[kBc / 16];
#pragma unroll
  for (int kk = 0; kk < kBc / 16; ++kk)
    wmma::load_matrix_sync(fa[kk], a + (kTransposedA ? kk * 16 * Ld<D>::p : kk * 16), Ld<D>::p);
#pragma unroll
  for (int n = 0; n < D / 16; ++n) {
    FragC acc;
    wmma::load_matrix_sync(acc, out + n * 16, Ld<D>::acc, wmma::mem_row_major);
#pragma unroll
    for (int kk = 0; kk < kBc / 16; ++kk) {
      FragB fb;
      wmma::load_matrix_sync(fb, b + kk * 16 * Ld<D>::rows + n * 16, Ld<D>::rows);
      wmma::mma_sync(acc, fa[kk], fb, acc);
    }
    wmma::store_matrix_sync(out + n * 16, acc, Ld<D>::acc, wmma::mem_row_major);
  }
}

template <int D>
__device__ void zeroAccumulator(float* acc) {
  for (int x = threadIdx.x; x < kBr * Ld<D>::acc; x += kThreads) acc[x] = 0.f;
}

// This warp's rows [stripe, stripe + 16) of the accumulator tile of the block's own rows, times
// `factor`, into this head's (T, D) bf16 slice of `view`, rows past T left out. Each warp writes
// the rows its own WMMA stores wrote, so a __syncwarp before is enough.
template <int D>
__device__ void storeStripe(const HeadsView& view, const float* acc, const TileBlock& blk, float factor) {
  bf16* rows = blk.rows(view);
  for (int r = 0; r < kStripe; ++r) {
    int row = blk.stripe + r;
    if (blk.lo + row >= blk.T) break;
    for (int d = blk.lane; d < D; d += 32)
      rows[(blk.lo + row) * view.st + d] = __float2bfloat16(acc[row * Ld<D>::acc + d] * factor);
  }
}

// ---- forward ----

// grid (ceil(T / kBr), H, B). Writes O (B, H, T, D) and lse (B, H, T).
template <int D>
__global__ void __launch_bounds__(kThreads) forwardKernel(const ForwardArgs args, const Derived dv) {
  using S = ForwardSmem<D>;
  bf16 *qs = smemAt<bf16>(S::q), *ks = smemAt<bf16>(S::k), *vs = smemAt<bf16>(S::v), *ps = smemAt<bf16>(S::p);
  float *ss = smemAt<float>(S::s), *os = smemAt<float>(S::o);

  const TileBlock blk = tileBlock(args.shape, args.bias);  // its tile: query rows [r0, r1)
  const int T = blk.T, r0 = blk.lo, stripe = blk.stripe;

  loadRows<D>(qs, args.q, blk, r0);
  zeroAccumulator<D>(os);
  __syncthreads();

  // This lane's half of one row (HalfRow): the running max and sum of that row, the same in both
  // of its lanes.
  const HalfRow mine = halfRow(blk);
  const int i = r0 + mine.row;
  float rowMax = -INFINITY, rowSum = 0.f;

  for (int c0 = 0; c0 < T; c0 += kBc) {
    if (!blk.visits(tile::Walk::Keys, c0)) continue;
    loadKeyTile<D>(ks, vs, args, blk, c0);

    stripeTimesTransposed<D>(ss + stripe * Ld<D>::s, qs + stripe * Ld<D>::rows, ks);  // (16, kBc)
    __syncwarp();
    float s[32];
#pragma unroll
    for (int c = 0; c < 32; ++c) {
      const int col = mine.column(c);
      s[c] = tile::logit(blk.hb, ss[mine.row * Ld<D>::s + col], args.scale, i, c0 + col, T);
    }
    float tileMax = -INFINITY;
#pragma unroll
    for (int c = 0; c < 32; ++c) tileMax = fmaxf(tileMax, s[c]);
    const float newMax = fmaxf(rowMax, fmaxf(tileMax, __shfl_xor_sync(0xffffffffu, tileMax, 16)));
    // A row with no finite logit yet (padding rows past T) adds nothing and rescales nothing.
    const bool empty = newMax == -INFINITY;
    const float alpha = empty ? 1.f : __expf(rowMax - newMax);
    const uint32_t keepBits = tile::dropoutKeepBits(args.seed, blk.batchHead, i, c0 + 32 * mine.half, dv.threshold);
    float tileSum = 0.f;
#pragma unroll
    for (int c = 0; c < 32; ++c) {
      const float p = empty ? 0.f : __expf(s[c] - newMax);
      tileSum += p;
      ps[mine.row * Ld<D>::p + mine.column(c)] =
          __float2bfloat16(tile::afterDropout(p, mine.kept(keepBits, c), dv.keepScale));
    }
    rowSum = rowSum * alpha + (tileSum + __shfl_xor_sync(0xffffffffu, tileSum, 16));  // the sum before dropout
    rowMax = newMax;
    scaleHalfRow<D>(os, mine, alpha);
    __syncwarp();
    stripeAccumulate<D, false>(os + stripe * Ld<D>::acc, ps + stripe * Ld<D>::p, vs);  // O += P~ V
    __syncwarp();
  }

  // O = accumulator / l in place, then written row by row (coalesced), rows past T left out.
  const bool empty = !(rowSum > 0.f);  // cannot happen for i < T: the diagonal is never blocked
  scaleHalfRow<D>(os, mine, empty ? 0.f : 1.f / rowSum);
  if (mine.half == 0 && i < T) blk.stats(args.lse)[i] = empty ? INFINITY : rowMax + logf(rowSum);
  __syncwarp();
  storeStripe<D>(args.o, os, blk, 1.f);
}

// ---- backward ----

// rowDot[b, h, i] = sum_d dO[b, h, i, d] * O[b, h, i, d] in fp32. One warp per row.
template <int D>
__global__ void __launch_bounds__(kThreads) rowDotKernel(const BackwardArgs args, float* rowDot) {
  const int T = args.shape.T, H = args.shape.H;
  const int64_t rowIndex = int64_t(blockIdx.x) * kWarps + threadIdx.x / 32;
  if (rowIndex >= int64_t(args.shape.B) * H * T) return;
  const int i = int(rowIndex % T), bh = int(rowIndex / T), b = bh / H, h = bh % H, lane = threadIdx.x % 32;
  const bf16* o = headRows(args.o, b, h) + i * args.o.st;
  const bf16* dO = headRows(args.dO, b, h) + i * args.dO.st;
  float acc = 0.f;
  for (int d = lane; d < D; d += 32) acc += __bfloat162float(o[d]) * __bfloat162float(dO[d]);
  acc = warpSum(acc);
  if (lane == 0) rowDot[rowIndex] = acc;
}

// The shared-memory tiles of a (query tile, key tile) pair in keyGradKernel and queryGradKernel.
struct BackwardTiles {
  bf16 *q, *dO, *k, *v;  // (64, D) bf16, row length Ld::rows
  float* s;              // (64, 64) fp32, Ld::s: S = Q K^T, then dP~ = dO V^T
  bf16 *p, *dS;          // (64, 64) bf16, Ld::p: P~ (keyGrad; nullptr in queryGrad) and dS
  float *lse, *rowDot;   // (64): the query tile's log-sum-exp and D_i
};

// The tiles at the offsets of layout S (KeyGradSmem, QueryGradSmem), P~ at `p`.
template <typename S>
__device__ BackwardTiles backwardTiles(bf16* p) {
  return {smemAt<bf16>(S::q),  smemAt<bf16>(S::dO),   smemAt<bf16>(S::k),
          smemAt<bf16>(S::v),  smemAt<float>(S::s),   p,
          smemAt<bf16>(S::dS), smemAt<float>(S::lse), smemAt<float>(S::rowDot)};
}

// Loads the lse and D_i of query rows [r0, r0 + kBr) (+inf and 0 past T: their P is then 0).
__device__ void loadRowStats(const BackwardTiles& t, const float* lseAll, const float* rowDotAll, const TileBlock& blk,
                             int r0) {
  const float* lse = blk.stats(lseAll);
  const float* rowDot = blk.stats(rowDotAll);
  for (int x = threadIdx.x; x < kBr; x += kThreads) {
    const int i = r0 + x;
    t.lse[x] = i < blk.T ? lse[i] : INFINITY;
    t.rowDot[x] = i < blk.T ? rowDot[i] : 0.f;
  }
}

// One warp, its 16 query rows of a (query tile r0, key tile c0) pair, with the pair's Q, dO, K, V,
// lse and D_i in shared memory: S = Q K^T, then P = exp(scale S + bias - lse) of this lane's cells
// (HalfRow) and their dropout mask, in registers, then dP~ = dO V^T, then dS = P o (dP - D_i) into
// this warp's rows of t.dS and, where t.p is not nullptr, P~ into its rows of t.p. With
// kBiasGrads, returns the bias gradients of this lane's cells, summed in a fixed cell order, and
// adds the cells to rowTerm (this lane's half of its row's tile::RowTerm); else zeros.
template <int D, bool kBiasGrads>
__device__ __forceinline__ tile::BiasGrads<float> backwardStripe(const BackwardTiles& t, const BackwardArgs& args,
                                                                 const Derived& dv, const TileBlock& blk, int r0,
                                                                 int c0, tile::RowTerm<float>& rowTerm) {
  const HalfRow mine = halfRow(blk);
  const int i = r0 + mine.row;
  const float lse = t.lse[mine.row], rowDot = t.rowDot[mine.row];
  float p[32];
  tile::BiasGrads<float> grads;
  stripeTimesTransposed<D>(t.s + blk.stripe * Ld<D>::s, t.q + blk.stripe * Ld<D>::rows, t.k);
  __syncwarp();
#pragma unroll
  for (int c = 0; c < 32; ++c) {
    const int col = mine.column(c);
    const float s = tile::logit(blk.hb, t.s[mine.row * Ld<D>::s + col], args.scale, i, c0 + col, blk.T);
    p[c] = __expf(s - lse);  // exactly 0 where s = -inf or the row is padding (lse = +inf)
  }
  const uint32_t keepBits = tile::dropoutKeepBits(args.seed, blk.batchHead, i, c0 + 32 * mine.half, dv.threshold);
  __syncwarp();
  stripeTimesTransposed<D>(t.s + blk.stripe * Ld<D>::s, t.dO + blk.stripe * Ld<D>::rows, t.v);  // dP~ = dO V^T
  __syncwarp();
#pragma unroll
  for (int c = 0; c < 32; ++c) {
    const int col = mine.column(c), j = c0 + col;
    const bool keep = mine.kept(keepBits, c);
    const float dPTilde = t.s[mine.row * Ld<D>::s + col];
    const float dS = tile::scoreGrad(p[c], dPTilde, keep, dv.keepScale, rowDot);
    if (t.p != nullptr) t.p[mine.row * Ld<D>::p + col] = __float2bfloat16(tile::afterDropout(p[c], keep, dv.keepScale));
    t.dS[mine.row * Ld<D>::p + col] = __float2bfloat16(dS);
    if constexpr (kBiasGrads) {
      if (i < blk.T && j < blk.T) {
        const tile::BiasCell cell = tile::biasCell(blk.hb, i, j);
        grads.add(cell, dS);
        rowTerm.add(cell, p[c], tile::afterDropout(dPTilde, keep, dv.keepScale));
      }
    }
  }
  return grads;
}

// grid (ceil(T / kBc), H, B): one block per key tile; dK, dV summed over every query tile.
template <int D>
__global__ void __launch_bounds__(kThreads)
    keyGradKernel(const BackwardArgs args, const Derived dv, const float* rowDotAll) {
  using S = KeyGradSmem<D>;
  const BackwardTiles t = backwardTiles<S>(smemAt<bf16>(S::p));
  float *dKs = smemAt<float>(S::dK), *dVs = smemAt<float>(S::dV);

  const TileBlock blk = tileBlock(args.shape, args.bias);  // its tile: keys [c0, c1)
  const int T = blk.T, c0 = blk.lo, stripe = blk.stripe;

  loadRows<D>(t.k, args.k, blk, c0);
  loadRows<D>(t.v, args.v, blk, c0);
  zeroAccumulator<D>(dKs);
  zeroAccumulator<D>(dVs);

  for (int r0 = 0; r0 < T; r0 += kBr) {
    if (!blk.visits(tile::Walk::Queries, r0)) continue;
    __syncthreads();  // every warp is done with the previous Q, dO, P~, dS
    loadRows<D>(t.q, args.q, blk, r0);
    loadRows<D>(t.dO, args.dO, blk, r0);
    loadRowStats(t, args.lse, rowDotAll, blk, r0);
    __syncthreads();

    // This warp's 16 query rows: P~ and dS.
    tile::RowTerm<float> unused;
    backwardStripe<D, false>(t, args, dv, blk, r0, c0, unused);
    __syncthreads();  // P~ and dS of all 64 query rows are in shared memory

    // This warp's 16 keys: dV += P~^T dO, dK += dS^T Q (times scale at the end).
    stripeAccumulate<D, true>(dVs + stripe * Ld<D>::acc, t.p + stripe, t.dO);
    stripeAccumulate<D, true>(dKs + stripe * Ld<D>::acc, t.dS + stripe, t.q);
  }
  // The accumulators were zeroed by all threads, and each lane's WMMA stores of its warp's rows
  // must be complete before storeStripe reads them across lanes.
  __syncthreads();
  storeStripe<D>(args.dk, dKs, blk, args.scale);
  storeStripe<D>(args.dv, dVs, blk, 1.f);
}

// grid (ceil(T / kBr), H, B): one block per query tile; dQ summed over every key tile, and with
// kBiasGrads this block's share of the bias gradients written to
// partials[(b * H + h) * qTiles + tile][3]. kBiasGrads is a template parameter so that the
// fixed-slope backward compiles without the per-cell bias bookkeeping.
template <int D, bool kBiasGrads>
__global__ void __launch_bounds__(kThreads)
    queryGradKernel(const BackwardArgs args, const Derived dv, const float* rowDotAll, double* partials) {
  using S = QueryGradSmem<D>;
  const BackwardTiles t = backwardTiles<S>(nullptr);  // dQ needs no P~
  float* dQs = smemAt<float>(S::dQ);
  double* warpPartials = smemAt<double>(S::partial);  // (kWarps, 3)

  const TileBlock blk = tileBlock(args.shape, args.bias);  // its tile: query rows [r0, r1)
  const int T = blk.T, r0 = blk.lo, warp = blk.warp, lane = blk.lane, stripe = blk.stripe;

  loadRows<D>(t.q, args.q, blk, r0);
  loadRows<D>(t.dO, args.dO, blk, r0);
  loadRowStats(t, args.lse, rowDotAll, blk, r0);
  zeroAccumulator<D>(dQs);
  __syncthreads();

  // This lane's cells, summed in a fixed order: sum dS * dbias/dparameter, and its half of its row's
  // RowTerm.
  tile::BiasGrads<double> grads;
  tile::RowTerm<float> rowTerm;
  for (int c0 = 0; c0 < T; c0 += kBc) {
    if (!blk.visits(tile::Walk::Keys, c0)) continue;
    loadKeyTile<D>(t.k, t.v, args, blk, c0);

    const tile::BiasGrads<float> tileGrads = backwardStripe<D, kBiasGrads>(t, args, dv, blk, r0, c0, rowTerm);
    grads.past += tileGrads.past, grads.future += tileGrads.future, grads.first += tileGrads.first;
    __syncwarp();
    stripeAccumulate<D, false>(dQs + stripe * Ld<D>::acc, t.dS + stripe * Ld<D>::p, t.k);  // dQ += dS K
    __syncwarp();
  }
  storeStripe<D>(args.dq, dQs, blk, args.scale);

  if constexpr (kBiasGrads) {
    // Each row's whole RowTerm (its two lanes' halves), its correction added once, by the lane of
    // the first half.
    const HalfRow mine = halfRow(blk);
    tile::RowTerm<float> row;
    row.rowDot = rowTerm.rowDot + __shfl_xor_sync(0xffffffffu, rowTerm.rowDot, 16);
    row.weight.past = rowTerm.weight.past + __shfl_xor_sync(0xffffffffu, rowTerm.weight.past, 16);
    row.weight.future = rowTerm.weight.future + __shfl_xor_sync(0xffffffffu, rowTerm.weight.future, 16);
    row.weight.first = rowTerm.weight.first + __shfl_xor_sync(0xffffffffu, rowTerm.weight.first, 16);
    if (mine.half == 0) tile::addRowCorrection(grads, row, t.rowDot[mine.row]);
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
      partials[(int64_t(blk.batchHead) * gridDim.x + blockIdx.x) * 3 + threadIdx.x] = sum;
    }
  }
}

// One thread per (head, parameter): the sum over batches and query tiles, in that fixed order.
__global__ void reduceBiasGradsKernel(const double* partials, int B, int H, int qTiles, float* dPast, float* dFuture,
                                      float* dFirst) {
  const int t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= H * 3) return;
  const int h = t / 3, which = t % 3;
  float* out = which == 0 ? dPast : (which == 1 ? dFuture : dFirst);
  if (out == nullptr) return;
  double sum = 0.0;
  for (int b = 0; b < B; ++b)
    for (int tile = 0; tile < qTiles; ++tile) sum += partials[(int64_t(b * H + h) * qTiles + tile) * 3 + which];
  out[h] = float(sum);
}

// ---- host side ----

bool readable(const HeadsView& view) {
  return view.data != nullptr && reinterpret_cast<uintptr_t>(view.data) % 16 == 0 && view.sb % 8 == 0 &&
         view.sh % 8 == 0 && view.st % 8 == 0;
}

Derived derive(const AttentionShape& shape, float dropout) {
  Derived dv;
  dv.threshold = tile::dropoutThreshold(dropout);
  dv.keepScale = dropout > 0.f ? 1.f / (1.f - dropout) : 1.f;
  dv.qTiles = ceilDiv(shape.T, kBr);
  return dv;
}

// Runs kernel on grid, kThreads threads a block, with smemBytes of dynamic shared memory; launch
// errors are returned. Through cudaLaunchKernelEx rather than <<<...>>>, which is not C++: this file
// then also compiles as plain C++, and tests/cuda_emulation runs its kernels on the CPU.
template <typename... Params, typename... Args>
cudaError_t launch(void (*kernel)(Params...), dim3 grid, size_t smemBytes, cudaStream_t stream, Args&&... args) {
  cudaLaunchConfig_t config = {};
  config.gridDim = grid;
  config.blockDim = dim3(kThreads);
  config.dynamicSmemBytes = smemBytes;
  config.stream = stream;
  return cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...);
}

template <typename Kernel>
cudaError_t allowSharedMemory(Kernel kernel, size_t bytes) {
  return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes));
}

template <int D>
cudaError_t forward(const ForwardArgs& args, cudaStream_t stream) {
  const Derived dv = derive(args.shape, args.dropout);
  const size_t bytes = ForwardSmem<D>::bytes;
  if (cudaError_t e = allowSharedMemory(forwardKernel<D>, bytes); e != cudaSuccess) return e;
  return launch(forwardKernel<D>, dim3(dv.qTiles, args.shape.H, args.shape.B), bytes, stream, args, dv);
}

// Workspace: rowDot (B, H, T) fp32, then the bias-gradient partials (B, H, qTiles, 3) fp64.
size_t rowDotBytes(const AttentionShape& s) { return align128(size_t(s.B) * s.H * s.T * sizeof(float)); }
size_t partialBytes(const AttentionShape& s) {
  return align128(size_t(s.B) * s.H * ceilDiv(s.T, kBr) * 3 * sizeof(double));
}

template <int D>
cudaError_t backward(const BackwardArgs& args, void* workspace, cudaStream_t stream) {
  const AttentionShape& s = args.shape;
  const Derived dv = derive(s, args.dropout);
  float* rowDot = static_cast<float*>(workspace);
  const bool biasGrads = args.dSlopePast || args.dSlopeFuture || args.dFirstTokenBias;
  double* partials =
      biasGrads ? reinterpret_cast<double*>(static_cast<unsigned char*>(workspace) + rowDotBytes(s)) : nullptr;

  const int64_t rows = int64_t(s.B) * s.H * s.T;
  if (cudaError_t e = launch(rowDotKernel<D>, dim3(unsigned((rows + kWarps - 1) / kWarps)), 0, stream, args, rowDot);
      e != cudaSuccess)
    return e;

  const size_t keyBytes = KeyGradSmem<D>::bytes, queryBytes = QueryGradSmem<D>::bytes;
  if (cudaError_t e = allowSharedMemory(keyGradKernel<D>, keyBytes); e != cudaSuccess) return e;
  if (cudaError_t e = biasGrads ? allowSharedMemory(queryGradKernel<D, true>, queryBytes)
                                : allowSharedMemory(queryGradKernel<D, false>, queryBytes);
      e != cudaSuccess)
    return e;
  if (cudaError_t e = launch(keyGradKernel<D>, dim3(ceilDiv(s.T, kBc), s.H, s.B), keyBytes, stream, args, dv, rowDot);
      e != cudaSuccess)
    return e;
  const dim3 queryGrid(dv.qTiles, s.H, s.B);
  if (cudaError_t e =
          biasGrads ? launch(queryGradKernel<D, true>, queryGrid, queryBytes, stream, args, dv, rowDot, partials)
                    : launch(queryGradKernel<D, false>, queryGrid, queryBytes, stream, args, dv, rowDot, partials);
      e != cudaSuccess)
    return e;
  if (!biasGrads) return cudaSuccess;
  return launch(reduceBiasGradsKernel, dim3(ceilDiv(s.H * 3, kThreads)), 0, stream, partials, s.B, s.H, dv.qTiles,
                args.dSlopePast, args.dSlopeFuture, args.dFirstTokenBias);
}

template <typename Kernel>
cudaError_t factsOf(Kernel kernel, const char* name, size_t dynamicBytes, KernelFacts& facts) {
  cudaFuncAttributes attributes;
  if (cudaError_t e = cudaFuncGetAttributes(&attributes, kernel); e != cudaSuccess) return e;
  if (dynamicBytes > 0)
    if (cudaError_t e = allowSharedMemory(kernel, dynamicBytes); e != cudaSuccess) return e;
  int blocks = 0;
  if (cudaError_t e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, kThreads, dynamicBytes);
      e != cudaSuccess)
    return e;
  facts = {name, attributes.numRegs, attributes.sharedSizeBytes + dynamicBytes, blocks};
  return cudaSuccess;
}

template <int D>
cudaError_t kernelFacts(KernelFacts* facts) {
  if (cudaError_t e = factsOf(forwardKernel<D>, "forward", ForwardSmem<D>::bytes, facts[0]); e != cudaSuccess) return e;
  if (cudaError_t e = factsOf(rowDotKernel<D>, "rowDot", 0, facts[1]); e != cudaSuccess) return e;
  if (cudaError_t e = factsOf(keyGradKernel<D>, "keyGrad", KeyGradSmem<D>::bytes, facts[2]); e != cudaSuccess) return e;
  if (cudaError_t e = factsOf(queryGradKernel<D, false>, "queryGrad", QueryGradSmem<D>::bytes, facts[3]);
      e != cudaSuccess)
    return e;
  return factsOf(queryGradKernel<D, true>, "queryGrad+bias", QueryGradSmem<D>::bytes, facts[4]);
}

cudaError_t zeroBiasGrads(const BackwardArgs& args, cudaStream_t stream) {
  for (float* g : {args.dSlopePast, args.dSlopeFuture, args.dFirstTokenBias})
    if (g != nullptr)
      if (cudaError_t e = cudaMemsetAsync(g, 0, size_t(args.shape.H) * sizeof(float), stream); e != cudaSuccess)
        return e;
  return cudaSuccess;
}

}  // namespace

const char* linearBiasAttentionCheck(const AttentionShape& s, float dropout) {
  if (s.B < 1 || s.H < 1 || s.T < 0) return "fused ALiBi attention: B and H must be positive, T non-negative";
  if (s.B > 65535) return "fused ALiBi attention: at most 65535 sequences per call";
  if (s.H > 64) return "fused ALiBi attention: at most 64 heads (the block flags are a 64-bit mask)";
  if (s.D != 64 && s.D != 128) return "fused ALiBi attention: head dimension must be 64 or 128";
  if (!(dropout >= 0.f && dropout < 1.f)) return "fused ALiBi attention: dropout must be in [0, 1)";
  // The backward's row-statistics kernel has one warp per (b, h, t) row in a 1-D grid.
  if (int64_t(s.B) * s.H * s.T > int64_t(kWarps) * ((int64_t(1) << 31) - 1))
    return "fused ALiBi attention: more than 2^33 (batch, head, position) rows";
  return nullptr;
}

const char* linearBiasAttentionDeviceCheck(int device, int D) {
  int major = 0, optin = 0;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess ||
      cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device) != cudaSuccess) {
    cudaGetLastError();  // not this process's error to keep
    return "fused ALiBi attention: cannot query the GPU's compute capability and shared memory";
  }
  if (major < 8) return "fused ALiBi attention: needs a GPU of compute capability 8.0 or newer (bf16 tensor cores)";
  if (D != 64 && D != 128) return "fused ALiBi attention: head dimension must be 64 or 128";
  if (size_t(optin) < (D == 64 ? largestSmem<64>() : largestSmem<128>()))
    return D == 64 ? "fused ALiBi attention: this GPU has too little shared memory per block for head dimension 64"
                   : "fused ALiBi attention: this GPU has too little shared memory per block for head dimension 128";
  return nullptr;
}

cudaError_t linearBiasAttentionForward(const ForwardArgs& args, cudaStream_t stream) {
  if (linearBiasAttentionCheck(args.shape, args.dropout) != nullptr) return cudaErrorInvalidValue;
  if (args.shape.T == 0) return cudaSuccess;  // empty tensors may have no storage at all
  if (!readable(args.q) || !readable(args.k) || !readable(args.v) || !readable(args.o) || args.lse == nullptr ||
      args.bias.slopePast == nullptr || args.bias.slopeFuture == nullptr)
    return cudaErrorInvalidValue;
  return args.shape.D == 64 ? forward<64>(args, stream) : forward<128>(args, stream);
}

cudaError_t linearBiasAttentionKernelFacts(int D, KernelFacts* facts) {
  if (D != 64 && D != 128) return cudaErrorInvalidValue;
  return D == 64 ? kernelFacts<64>(facts) : kernelFacts<128>(facts);
}

size_t linearBiasAttentionBackwardWorkspace(const AttentionShape& shape) {
  return rowDotBytes(shape) + partialBytes(shape);
}

cudaError_t linearBiasAttentionBackward(const BackwardArgs& args, void* workspace, cudaStream_t stream) {
  if (linearBiasAttentionCheck(args.shape, args.dropout) != nullptr) return cudaErrorInvalidValue;
  if (args.shape.T == 0) return zeroBiasGrads(args, stream);  // no pair: zero slope gradients
  for (const HeadsView* view : {&args.q, &args.k, &args.v, &args.o, &args.dO, &args.dq, &args.dk, &args.dv})
    if (!readable(*view)) return cudaErrorInvalidValue;
  if (args.lse == nullptr || workspace == nullptr || args.bias.slopePast == nullptr || args.bias.slopeFuture == nullptr)
    return cudaErrorInvalidValue;
  return args.shape.D == 64 ? backward<64>(args, workspace, stream) : backward<128>(args, workspace, stream);
}

}  // namespace xtrap::cuda
