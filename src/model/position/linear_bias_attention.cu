// Fused attention for the ALiBi family (linear_bias_attention.cuh): forward and backward.
//
// B = batch, H = heads, T = sequence length, D = head dimension (64 or 128).
// A query tile is kBr = 64 rows, a key tile kBc = 64 columns; a thread block has 4 warps, each
// owning 16 rows of the block's tile (query rows; keys in keyGrad).
//
// The tile products are mma.sync m16n8k16 (bf16 -> fp32) on fragments whose register layout is
// documented (warp_mma.cuh), read from shared memory with ldmatrix, so a warp's scores, their
// probabilities and its accumulators stay in registers, and each lane knows the (i, j) of each
// of its cells: the bias is computed there, per cell, from the head's spec (linear_bias_tile.h).
// A score of row i of a warp's 16 lies in the 4 lanes of one group (warp_mma.cuh's g): a row's
// max or sum takes 2 shuffles. Only Q, K, V (dO) tiles are in shared memory. The tile walked over
// (K and V; Q, dO and their row statistics in keyGrad) is double-buffered: cp.async copies of the
// next visited tile are in flight while the current one is computed (pipelinedWalk).
//
// Forward, one block per (query tile, head, batch), FlashAttention-2's loop: for every key tile
// that is not fully blocked, S = scale * Q K^T + bias in registers, online softmax with the
// running row max m and sum l in fp32, O = O * exp(m_old - m_new) + P~ V with P~ (bf16, after
// dropout) reused in registers as the A operand. At the end O /= l and the row's log-sum-exp
// m + log l is saved, in base 2 as the kernels' exponentials take it (the backward's P then costs
// no multiply of it per cell): it is all the backward needs of the softmax.
//
// Backward, FlashAttention-2's equations with P recomputed from the saved log-sum-exp:
//   P = exp(S + bias - lse), D_i = rowsum(dO o O), dP = dO V^T (masked by the same dropout),
//   dS = P o (dP - D_i), dV = P~^T dO, dK = scale dS^T Q, dQ = scale dS K, dBias = dS.
// rowDot computes D_i; then two passes, deterministic (no float atomics whose order varies):
// keyGrad (one block per key tile: dK, dV in registers over every query tile, its warps computing
// S^T = K Q^T, so that P~^T and dS^T are A operands in registers) and queryGrad (one block per
// query tile: dQ in registers over every key tile, and the bias gradients). Every output is summed
// by one block, at the price of S and dP computed in both: 7 tile products per tile pair
// (BackwardScheme::TwoPass). BackwardScheme::AtomicDq is FlashAttention-2's own way: keyGrad also
// writes dS^T to shared memory, reads it back as dS and adds dS K to an fp32 dQ in global memory with
// atomic adds (addQueryGrad; laid out in the adding lanes' order, queryGradStripe, so that each add
// of a warp fills whole sectors), which roundQueryGradKernel scales and rounds to bf16: 5 products per
// pair, and no queryGrad. Its keyGrad also sums the bias gradients, each cell's P dP centred on its
// row's weights, which the forward sums with the softmax (tile::CentredBiasGrads): a key tile sees
// each row in part, and needs no row's sum of P dP.
// In TwoPass's queryGrad the bias gradients dslopePast = sum dS * (-(i - j)), dslopeFuture =
// sum dS * (-(j - i - shift)), dfirstTokenBias = sum dS over first-token cells are summed per lane in a fixed cell
// order (on a linear tile with no first-token cell from its one term, without biasCell's branches), corrected for the
// rounding of D_i by each row's exact sum of P o dP (tile::RowTerm, summed over the row's cells), then summed across
// lanes and warps in a fixed order, written per block to a buffer, and summed over (batch, block) in a fixed order by
// one thread per (head, parameter).
//
// Negligible pairs: far from the diagonal ALiBi's bias makes a head's probabilities underflow (with
// slope 0.5, keys some 200 tokens away). With ForwardArgs::tileBounds the forward first computes
// each 64-row tile's largest |q| and |k| and smallest diagonal logit (tileBoundsKernel, one read of
// q and k), then where each tile's walks start and end once the pairs whose every probability these
// bounds show to be below 2^-136 (tile::negligibleTile) are left out at both ends
// (tileWalksKernel). Every tile loop walks only that span: the backward would compute the
// probabilities left out as exactly 0, the forward's sum and output lose less than 2^-136 of theirs.
// A pure function of the inputs, so the backward skips the same pairs.
//
// Dropout: Philox4x32-10 keyed by the seed, one draw per (batch*H + head, row, group of 4 keys)
// (linear_bias_tile.h), so the backward regenerates the forward's mask cell by cell. A group is
// the 4 keys one lane holds in two adjacent fragments: the forward and queryGrad draw once per 4
// cells, keyGrad (transposed) once per 2.
//
// Per cell, the kernels work in base 2 (log2(e) folded into the scale and the bias, as
// FlashAttention-2 does): each exponential is one ex2 instruction. Each kernel is instantiated with
// and without dropout, so evaluation and dropout-free training carry no per-cell dropout work.
//
// Hopper (compute capability 9.0): the forward and the backward (either scheme) can compute their
// tile products with the warpgroup MMA (TileProducts::WarpgroupMma, warpgroup_mma.cuh): a block's 4
// warps are one warpgroup, its 64 rows (queries; keys in keyGrad) one wgmma's M, and its tiles
// core-matrix tiles (core_matrix_tile.h) that wgmma reads from shared memory once for the 4 warps;
// each warp's accumulators lie in the registers mma.sync's would, so the rest of each kernel is the
// same code. In the backward the products a pair needs next are left in flight while the warp
// works: dP's while the scores become probabilities, dV's while dS becomes its A operand. Measured
// slower than mma.sync on an H200 (results/gpu.md, 2026-11-27: forward 1.37-1.50x, forward +
// backward 1.10-1.34x): in ncu on an H100 each lane's 16-byte copy into the core-matrix layout is a
// shared-memory wavefront and an L2 sector of its own (32 a warp's copy, against 15 and 24 into
// ldmatrix's), and L2 is 83-87% busy. What would make it faster: a 128-byte-swizzled layout whose
// rows' chunks lie together, TMA loads, and in the forward the next tile's scores in flight across
// this one's softmax (FA3).
// Measured slower on the H100 (results/gpu/h100-2026-11-26, causal B8 L2048 D 64), and removed: a
// forward of 32 query rows a warp (two 64-row query tiles a block, each K and V fragment read from
// shared memory serving two tile products; 241 registers, 2 blocks an SM): its forward 0.402 ms
// against 0.350 for the 16-row one here; and FlashAttention-2's one-pass backward in its
// deterministic mode (dS K added into per-block fp32 dQ slices that a last kernel sums, 5 tile
// products per pair instead of 7): 2.11 ms forward + backward against 1.36 for these two passes,
// the slices' fp32 traffic outweighing the products saved, and more memory.
#include <cuda_bf16.h>
#include <cuda_pipeline_primitives.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cfloat>
#include <cstdint>
#include <utility>

#include "cuda/async_copy.cuh"
#include "cuda/bf16_words.cuh"
#include "cuda/warp_mma.cuh"
#include "cuda/warpgroup_mma.cuh"
#include "model/position/linear_bias_attention.cuh"
#include "model/position/linear_bias_tile.h"

namespace xtrap::cuda {
namespace {

using bf16 = __nv_bfloat16;

constexpr int kBr = 64;    // query rows per tile
constexpr int kBc = 64;    // key columns per tile
constexpr int kWarps = 4;  // each warp owns 16 rows of its block's tile
constexpr int kThreads = 32 * kWarps;
constexpr int kStripe = kBr / kWarps;  // 16: the rows of one mma fragment
constexpr int kPadHalf = 8;            // bf16 row padding: ldmatrix's 8 rows fall in 32 different banks
// The forward's rescaling threshold (base 2), as FlashAttention-4's: a row's running max moves
// only for a logit more than this above it (forwardKernel).
constexpr float kRescaleSlack = 8.f;
static_assert(kBr == kBc, "keyGrad's key tiles use the query tiles' grid and stripes");

constexpr size_t align128(size_t n) { return (n + 127) / 128 * 128; }
constexpr int ceilDiv(int a, int b) { return (a + b - 1) / b; }

// Shared-memory tiles: (64, D) bf16, rows of D + 8 elements (16-byte aligned), and (64) fp32 row
// statistics. A double-buffered tile is two of them, one after the other (`tile` and `stat` apart).
template <int D>
struct Ld {
  static constexpr int rows = D + kPadHalf;
  static constexpr size_t rowsBytes = align128(size_t(kBr) * rows * sizeof(bf16));
  static constexpr size_t statBytes = align128(kBr * sizeof(float));
  static constexpr int tile = int(rowsBytes / sizeof(bf16)), stat = int(statBytes / sizeof(float));
};

// Forward: Q | K, V x 2.  D=64: 45 KiB, D=128: 85 KiB.
template <int D>
struct ForwardSmem {
  static constexpr size_t q = 0, k = q + Ld<D>::rowsBytes, v = k + 2 * Ld<D>::rowsBytes,
                          bytes = v + 2 * Ld<D>::rowsBytes;
};
// keyGrad: K, V | Q, dO, lse, D_i x 2.  D=64: 55 KiB, D=128: 103 KiB.
template <int D>
struct KeyGradSmem {
  static constexpr size_t k = 0, v = k + Ld<D>::rowsBytes, q = v + Ld<D>::rowsBytes, dO = q + 2 * Ld<D>::rowsBytes,
                          lse = dO + 2 * Ld<D>::rowsBytes, rowDot = lse + 2 * Ld<D>::statBytes,
                          bytes = rowDot + 2 * Ld<D>::statBytes;
};
// AtomicDq's keyGrad adds its dS^T tile: (kBc keys, kBr queries) bf16, rows of kBr + 8 elements
// (ldmatrix's 8 rows in 32 different banks again); for the bias gradients the query rows' weights
// (3 statistics x 2) and warp partials.  D=64: 66 KiB, D=128: 114 KiB.
constexpr int kDsRow = kBr + kPadHalf;
template <int D>
struct KeyGradAtomicSmem {
  static constexpr size_t dsT = KeyGradSmem<D>::bytes, weights = dsT + align128(size_t(kBc) * kDsRow * sizeof(bf16)),
                          partial = weights + 6 * Ld<D>::statBytes,
                          bytes = partial + align128(kWarps * 3 * sizeof(double));
};
// queryGrad: Q, dO, lse, D_i | K, V x 2 | warp partials.  D=64: 55 KiB, D=128: 103 KiB.
template <int D>
struct QueryGradSmem {
  static constexpr size_t q = 0, dO = q + Ld<D>::rowsBytes, lse = dO + Ld<D>::rowsBytes,
                          rowDot = lse + Ld<D>::statBytes, k = rowDot + Ld<D>::statBytes, v = k + 2 * Ld<D>::rowsBytes,
                          partial = v + 2 * Ld<D>::rowsBytes, bytes = partial + align128(kWarps * 3 * sizeof(double));
};

// The most shared memory any of the kernels for head dimension D asks for.
template <int D>
constexpr size_t largestSmem() {
  return std::max({ForwardSmem<D>::bytes, KeyGradAtomicSmem<D>::bytes, QueryGradSmem<D>::bytes});
}

// The A100 gives a block up to 163 KiB of shared memory (the H100 227, sm_86/89 GPUs 99: there only
// D = 64 runs, linearBiasAttentionDeviceCheck).
static_assert(largestSmem<128>() <= 163 * 1024, "a tile layout outgrew the A100's shared memory");
static_assert(largestSmem<64>() <= 99 * 1024, "a tile layout outgrew the shared memory of sm_86 GPUs");

// What every kernel gets besides the caller's arguments.
struct Derived {
  uint32_t threshold = 0;  // dropout threshold on 24-bit draws (0: no dropout)
  float keepScale = 1.f;   // 1 / (1 - p)
  int qTiles = 0;          // ceil(T / kBr)
};

// Dropout as one kernel instance applies it. The kernels are instantiated with and without it
// (kDropout: threshold > 0); without it (evaluation, training with p = 0) every cell is kept
// with scale 1, constants the compiler folds: no draw, test or multiply per cell is left.
template <bool kDropout>
__device__ __forceinline__ float keepScale(const Derived& dv) {
  return kDropout ? dv.keepScale : 1.f;
}
// tile::dropoutKeepGroup: bit w keeps word w of the group.
template <bool kDropout>
__device__ __forceinline__ uint32_t keepGroup(uint64_t seed, const Derived& dv, uint32_t batchHead, int i, int group) {
  return kDropout ? tile::dropoutKeepGroup(seed, batchHead, i, group, dv.threshold) : 0xfu;
}

// The kernels hold logits in base 2, log2(e) (scale q.k + bias), so that every exponential is
// one exp2f: a single ex2.approx.ftz instruction (CMakeLists compiles this file with -ftz=true),
// where __expf is a multiply by log2(e) and an ex2.approx whose denormal handling adds more.
// The saved log-sum-exp is in base 2 too (ForwardArgs::lse).
constexpr float kLog2e = 1.4426950408889634f;

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

// ---- what the three tile kernels share ----

// A tile's walks (TileBlock::scanVisits): the first tile of the other axis that its block visits and
// the end of its last, walking keys (as forward's and queryGrad's query tile) and queries (as
// keyGrad's key tile).
struct TileWalks {
  int keysBegin, keysEnd, queriesBegin, queriesEnd;
};

// ForwardArgs::tileBounds' buffer: the (B, H, tiles) tile::TileBounds (tileBoundsKernel), then the
// (B, H, tiles) TileWalks (tileWalksKernel), 16 bytes each.
struct NegligibleTiles {
  const float* buffer;
  int64_t tiles;  // B * H * ceil(T / 64)
  __device__ const tile::TileBound* bounds() const { return reinterpret_cast<const tile::TileBound*>(buffer); }
  __device__ const TileWalks* walks() const { return reinterpret_cast<const TileWalks*>(bounds() + tiles); }
};

// Where a block of forwardKernel, keyGradKernel or queryGradKernel works. Their grids are
// (ceil(T / 64), H, B): the block owns the tile [lo, hi) of [0, T) (query rows; keys in keyGrad),
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
        const uint32_t keep = groupKeep<kDropout>(args.seed, dv, blk, i[r], c0, m);
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

// ---- backward ----

// rowDot[b, h, i] = sum_d dO[b, h, i, d] * O[b, h, i, d] in fp32. A row is D / 8 threads (8 at
// D = 64), each reading 16 bytes of O and of dO (the glue's layout guarantee, as copyRows reads
// them) and summing its 8 products in order, then the row's threads sum theirs by halving
// exchanges: a fixed order. One warp a row read 2 bytes a lane: 64 loads of 2 bytes for a row
// of D = 64, where this makes 16 of 16 bytes.
template <int D>
constexpr int kRowDotRows = kThreads / (D / 8);  // a block's rows
template <int D>
__global__ void __launch_bounds__(kThreads) rowDotKernel(const BackwardArgs args, float* rowDot) {
  constexpr int kPieces = D / 8;
  static_assert(32 % kPieces == 0, "a row's threads in one warp");
  const int T = args.shape.T, H = args.shape.H;
  const int64_t rowIndex = int64_t(blockIdx.x) * kRowDotRows<D> + threadIdx.x / kPieces;
  const bool inside = rowIndex < int64_t(args.shape.B) * H * T;  // every lane stays for the exchanges
  float acc = 0.f;
  if (inside) {
    const int i = int(rowIndex % T), bh = int(rowIndex / T), b = bh / H, h = bh % H, col = threadIdx.x % kPieces * 8;
    const uint4 o = *reinterpret_cast<const uint4*>(headRows(args.o, b, h) + i * args.o.st + col);
    const uint4 dO = *reinterpret_cast<const uint4*>(headRows(args.dO, b, h) + i * args.dO.st + col);
    const uint32_t ow[4] = {o.x, o.y, o.z, o.w}, dw[4] = {dO.x, dO.y, dO.z, dO.w};
#pragma unroll
    for (int w = 0; w < 4; ++w) acc = fmaf(highBf16(ow[w]), highBf16(dw[w]), fmaf(lowBf16(ow[w]), lowBf16(dw[w]), acc));
  }
#pragma unroll
  for (int lanes = kPieces / 2; lanes > 0; lanes >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, lanes);
  if (inside && threadIdx.x % kPieces == 0) rowDot[rowIndex] = acc;
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
        const uint32_t keep = keepGroup<kDropout>(args.seed, dv, blk.batchHead, i, group);
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
// kWarpgroup: the three products by the warpgroup MMA on core-matrix tiles of Q, dO, K and V.
template <int D, bool kBiasGrads, bool kDropout, bool kWarpgroup = false>
__global__ void __launch_bounds__(kThreads, D == 64 && !kBiasGrads ? 4 : 0)
    queryGradKernel(const BackwardArgs args, const Derived dv, const float* rowDotAll, double* partials) {
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
          const uint32_t keep = groupKeep<kDropout>(args.seed, dv, blk, i[r], c0, m);
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

// AtomicDq's last step: dq = scale * dqAccum rounded to bf16. A thread per float4 of dqAccum,
// lane l's fragment n of a stripe (queryGradStripe): its elements are columns 8n + 2t, 8n + 2t + 1
// of the stripe's rows g and g + 8 (FragmentLane), two bf16 pairs; padding rows are left out.
template <int D>
__global__ void __launch_bounds__(kThreads)
    roundQueryGradKernel(const BackwardArgs args, const Derived dv, const float4* dqAccum) {
  constexpr int kFragments = kStripe * D / 4;  // a stripe's float4s
  const int T = args.shape.T, H = args.shape.H, stripes = dv.qTiles * kWarps;
  const int64_t index = int64_t(blockIdx.x) * kThreads + threadIdx.x;
  if (index >= int64_t(args.shape.B) * H * stripes * kFragments) return;
  const int64_t stripe = index / kFragments;  // of (B, H, stripes)
  const int n = int(index % kFragments) / 32, bh = int(stripe / stripes), b = bh / H, h = bh % H;
  const FragmentLane fl = fragmentLane(int(index % 32));
  const int first = int(stripe % stripes) * kStripe;
  const float4 x = dqAccum[index];
  bf16* column = headRows(args.dq, b, h) + fl.column(n, 0);
  const float s = args.scale;
  if (const int i = first + fl.row(0); i < T)
    *reinterpret_cast<uint32_t*>(column + i * args.dq.st) = bf16Word(s * x.x, s * x.y);
  if (const int i = first + fl.row(2); i < T)
    *reinterpret_cast<uint32_t*>(column + i * args.dq.st) = bf16Word(s * x.z, s * x.w);
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

// ---- the warpgroup MMA's products alone (linearBiasAttentionProbeWarpgroupProducts) ----

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

// ---- host side ----

// Whether a tile-bounds buffer (ForwardArgs::tileBounds) is aligned for its 16-byte bounds and walks.
bool boundsAligned(const float* tileBounds) {
  return reinterpret_cast<uintptr_t>(tileBounds) % alignof(tile::TileBound) == 0;
}

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

bool wantsBiasGrads(const BackwardArgs& a) { return a.dSlopePast || a.dSlopeFuture || a.dFirstTokenBias; }

bool atomicDq(const BackwardArgs& a) { return a.scheme == BackwardScheme::AtomicDq; }

// The backward's workspace, in bytes from its start: rowDot (B, H, T) fp32 at 0, then with AtomicDq
// dqAccum (B, H, T rounded up to 64, D) fp32 (queryGradStripe), then with bias gradients the
// per-block partials of the kernel that sums them (TwoPass: queryGrad, AtomicDq: keyGrad),
// (B, H, tiles, 3) fp64.
struct WorkspaceLayout {
  size_t dqAccum = 0, partials = 0, bytes = 0;
};
WorkspaceLayout workspaceLayout(const BackwardArgs& a) {
  const AttentionShape& s = a.shape;
  const size_t heads = size_t(s.B) * s.H, tiles = heads * ceilDiv(s.T, kBr);  // tiles of all heads
  WorkspaceLayout w;
  w.dqAccum = align128(heads * s.T * sizeof(float));
  w.partials = w.dqAccum + (atomicDq(a) ? align128(tiles * kBr * s.D * sizeof(float)) : 0);
  w.bytes = w.partials + (wantsBiasGrads(a) ? align128(tiles * 3 * sizeof(double)) : 0);
  return w;
}

template <int D>
cudaError_t backward(const BackwardArgs& args, void* workspace, cudaStream_t stream) {
  const AttentionShape& s = args.shape;
  const Derived dv = derive(s, args.dropout);
  const WorkspaceLayout layout = workspaceLayout(args);
  unsigned char* bytes = static_cast<unsigned char*>(workspace);
  float* rowDot = reinterpret_cast<float*>(bytes);
  const bool biasGrads = wantsBiasGrads(args), dropout = dv.threshold > 0, atomic = atomicDq(args);
  float* dqAccum = atomic ? reinterpret_cast<float*>(bytes + layout.dqAccum) : nullptr;
  double* partials = biasGrads ? reinterpret_cast<double*>(bytes + layout.partials) : nullptr;

  const int64_t rows = int64_t(s.B) * s.H * s.T;
  if (cudaError_t e = launch(rowDotKernel<D>, dim3(unsigned((rows + kRowDotRows<D> - 1) / kRowDotRows<D>)), 0, stream,
                             args, rowDot);
      e != cudaSuccess)
    return e;

  // TwoPass: keyGrad, then queryGrad (dQ and the bias gradients). AtomicDq: keyGrad alone (dQ's adds
  // and the bias gradients), then dQ's rounding.
  const bool warpgroup = args.products == TileProducts::WarpgroupMma;
  const auto keyGrad =
      warpgroup
          ? (!atomic
                 ? (dropout ? keyGradKernel<D, true, false, false, true> : keyGradKernel<D, false, false, false, true>)
             : biasGrads
                 ? (dropout ? keyGradKernel<D, true, true, true, true> : keyGradKernel<D, false, true, true, true>)
                 : (dropout ? keyGradKernel<D, true, true, false, true> : keyGradKernel<D, false, true, false, true>))
      : !atomic   ? (dropout ? keyGradKernel<D, true, false> : keyGradKernel<D, false, false>)
      : biasGrads ? (dropout ? keyGradKernel<D, true, true, true> : keyGradKernel<D, false, true, true>)
                  : (dropout ? keyGradKernel<D, true, true> : keyGradKernel<D, false, true>);
  const size_t keyBytes = atomic ? KeyGradAtomicSmem<D>::bytes : KeyGradSmem<D>::bytes;
  if (cudaError_t e = allowSharedMemory(keyGrad, keyBytes); e != cudaSuccess) return e;
  if (atomic)
    if (cudaError_t e = cudaMemsetAsync(dqAccum, 0, layout.partials - layout.dqAccum, stream); e != cudaSuccess)
      return e;
  if (cudaError_t e = launch(keyGrad, dim3(dv.qTiles, s.H, s.B), keyBytes, stream, args, dv, rowDot, dqAccum, partials);
      e != cudaSuccess)
    return e;
  if (!atomic) {
    const auto queryGrad =
        warpgroup
            ? (biasGrads ? (dropout ? queryGradKernel<D, true, true, true> : queryGradKernel<D, true, false, true>)
                         : (dropout ? queryGradKernel<D, false, true, true> : queryGradKernel<D, false, false, true>))
            : (biasGrads ? (dropout ? queryGradKernel<D, true, true> : queryGradKernel<D, true, false>)
                         : (dropout ? queryGradKernel<D, false, true> : queryGradKernel<D, false, false>));
    const size_t queryBytes = QueryGradSmem<D>::bytes;
    if (cudaError_t e = allowSharedMemory(queryGrad, queryBytes); e != cudaSuccess) return e;
    if (cudaError_t e = launch(queryGrad, dim3(dv.qTiles, s.H, s.B), queryBytes, stream, args, dv, rowDot, partials);
        e != cudaSuccess)
      return e;
  } else {
    const int64_t fragments = int64_t(s.B) * s.H * dv.qTiles * kBr * D / 4;  // dqAccum's float4s
    if (cudaError_t e = launch(roundQueryGradKernel<D>, dim3(unsigned((fragments + kThreads - 1) / kThreads)), 0,
                               stream, args, dv, reinterpret_cast<const float4*>(dqAccum));
        e != cudaSuccess)
      return e;
  }
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
  // facts[next++] of each kernel in kKernelFactsCount's order, until one fails.
  cudaError_t e = cudaSuccess;
  int next = 0;
  auto add = [&](auto kernel, const char* name, size_t dynamicBytes) {
    if (e == cudaSuccess) e = factsOf(kernel, name, dynamicBytes, facts[next++]);
  };
  add(forwardKernel<D, false, false>, "forward", ForwardSmem<D>::bytes);
  add(rowDotKernel<D>, "rowDot", 0);
  add(keyGradKernel<D, false, false>, "keyGrad", KeyGradSmem<D>::bytes);
  add(queryGradKernel<D, false, false>, "queryGrad", QueryGradSmem<D>::bytes);
  add(queryGradKernel<D, true, false>, "queryGrad+bias", QueryGradSmem<D>::bytes);
  add(keyGradKernel<D, false, true>, "keyGrad+dQ", KeyGradAtomicSmem<D>::bytes);
  add(keyGradKernel<D, false, true, true>, "keyGrad+dQ+bias", KeyGradAtomicSmem<D>::bytes);
  add(roundQueryGradKernel<D>, "roundQueryGrad", 0);
  add(forwardKernel<D, false, true>, "forward+weights", ForwardSmem<D>::bytes);
  add(tileBoundsKernel<D>, "tileBounds", kTileBoundsSmem);
  add(tileWalksKernel, "tileWalks", 0);
  add(forwardKernel<D, false, false, true>, "forward+wgmma", ForwardSmem<D>::bytes);
  add(keyGradKernel<D, false, false, false, true>, "keyGrad+wgmma", KeyGradSmem<D>::bytes);
  add(keyGradKernel<D, false, true, false, true>, "keyGrad+dQ+wgmma", KeyGradAtomicSmem<D>::bytes);
  add(queryGradKernel<D, false, false, true>, "queryGrad+wgmma", QueryGradSmem<D>::bytes);
  return e;
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

const char* linearBiasAttentionProductsCheck(int device, TileProducts products) {
  if (products == TileProducts::WarpMma) return nullptr;
  int major = 0, minor = 0;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) != cudaSuccess) {
    cudaGetLastError();  // not this process's error to keep
    return "fused ALiBi attention: cannot query the GPU's compute capability";
  }
  if (major != 9 || minor != 0)
    return "fused ALiBi attention: the warpgroup MMA's tile products need a GPU of compute capability 9.0 (sm_90a: "
           "H100, H200)";
  return nullptr;
}

cudaError_t linearBiasAttentionForward(const ForwardArgs& args, cudaStream_t stream) {
  if (linearBiasAttentionCheck(args.shape, args.dropout) != nullptr) return cudaErrorInvalidValue;
  int device = 0;
  if (cudaError_t e = cudaGetDevice(&device); e != cudaSuccess) return e;
  if (linearBiasAttentionProductsCheck(device, args.products) != nullptr) return cudaErrorNotSupported;
  if (args.shape.T == 0) return cudaSuccess;  // empty tensors may have no storage at all
  if (!readable(args.q) || !readable(args.k) || !readable(args.v) || !readable(args.o) || args.lse == nullptr ||
      args.bias.slopePast == nullptr || args.bias.slopeFuture == nullptr || !boundsAligned(args.tileBounds))
    return cudaErrorInvalidValue;
  return args.shape.D == 64 ? forward<64>(args, stream) : forward<128>(args, stream);
}

cudaError_t linearBiasAttentionProbeWarpgroupProducts(const WarpgroupProductsProbe& probe, cudaStream_t stream) {
  if (probe.D != 64 && probe.D != 128) return cudaErrorInvalidValue;
  for (const void* pointer : {probe.q, probe.k, probe.v, probe.p, static_cast<const void*>(probe.s),
                              static_cast<const void*>(probe.sFromZero), static_cast<const void*>(probe.o),
                              static_cast<const void*>(probe.dq)})
    if (pointer == nullptr) return cudaErrorInvalidValue;
  if (reinterpret_cast<uintptr_t>(probe.dq) % 16 != 0) return cudaErrorInvalidValue;  // its vector adds
  int device = 0;
  if (cudaError_t e = cudaGetDevice(&device); e != cudaSuccess) return e;
  if (linearBiasAttentionProductsCheck(device, TileProducts::WarpgroupMma) != nullptr) return cudaErrorNotSupported;
  const auto kernel = probe.D == 64 ? warpgroupProductsProbeKernel<64> : warpgroupProductsProbeKernel<128>;
  const size_t bytes = (3 * size_t(kBr) * probe.D + kBr * kBc) * sizeof(bf16);
  if (cudaError_t e = allowSharedMemory(kernel, bytes); e != cudaSuccess) return e;
  return launch(kernel, dim3(1), bytes, stream, probe);
}

cudaError_t linearBiasAttentionKernelFacts(int D, KernelFacts* facts) {
  if (D != 64 && D != 128) return cudaErrorInvalidValue;
  return D == 64 ? kernelFacts<64>(facts) : kernelFacts<128>(facts);
}

size_t linearBiasAttentionTileBoundsFloats(const AttentionShape& shape) {
  // Per tile a TileBound and a TileWalks, 4 floats' bytes each (NegligibleTiles).
  static_assert(sizeof(tile::TileBound) == 4 * sizeof(float) && sizeof(TileWalks) == 4 * sizeof(float));
  return size_t(shape.B) * shape.H * ceilDiv(shape.T, kBr) * 8;
}

size_t linearBiasAttentionBackwardWorkspace(const BackwardArgs& args) { return workspaceLayout(args).bytes; }

cudaError_t linearBiasAttentionBackward(const BackwardArgs& args, void* workspace, cudaStream_t stream) {
  if (linearBiasAttentionCheck(args.shape, args.dropout) != nullptr) return cudaErrorInvalidValue;
  if (args.shape.T == 0) return zeroBiasGrads(args, stream);  // no pair: zero slope gradients
  for (const HeadsView* view : {&args.q, &args.k, &args.v, &args.o, &args.dO, &args.dq, &args.dk, &args.dv})
    if (!readable(*view)) return cudaErrorInvalidValue;
  if (args.lse == nullptr || workspace == nullptr || args.bias.slopePast == nullptr || args.bias.slopeFuture == nullptr)
    return cudaErrorInvalidValue;
  if (atomicDq(args) && wantsBiasGrads(args) && args.rowWeights == nullptr) return cudaErrorInvalidValue;
  if (!boundsAligned(args.tileBounds)) return cudaErrorInvalidValue;
  int device = 0;
  if (cudaError_t e = cudaGetDevice(&device); e != cudaSuccess) return e;
  if (linearBiasAttentionProductsCheck(device, args.products) != nullptr) return cudaErrorNotSupported;
  return args.shape.D == 64 ? backward<64>(args, workspace, stream) : backward<128>(args, workspace, stream);
}

}  // namespace xtrap::cuda
