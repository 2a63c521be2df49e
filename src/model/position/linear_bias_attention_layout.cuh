#pragma once
// The fused ALiBi-family attention kernels' geometry (linear_bias_attention.cu has the overview):
// the tiles, the blocks' shared-memory layouts, the tile-bounds buffer's, and what each launch
// derives from its arguments. Read by the kernels and by the host code that launches them.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "cuda/rng_state.cuh"
#include "model/counter_dropout.h"
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
// The Philox key of this call's dropout mask (tile::dropoutDraw's seed): dropoutKey
// (counter_dropout.h) of the (seed, offset) `rng` stands for, read on the device, so that calls
// and graph replays with different offsets draw unrelated masks. Where `resolved` is not nullptr
// the pair is also recorded there for the backward (rng_state.cuh). 0 without dropout, nothing read.
template <bool kDropout>
__device__ __forceinline__ uint64_t dropoutSeed(const RngState& rng, int64_t* resolved) {
  if (!kDropout) return 0;
  uint64_t seed = 0, offset = 0;
  resolveRng(rng, resolved, seed, offset);
  return dropoutKey(seed, offset);
}
// tile::dropoutKeepGroup: bit w keeps word w of the group.
template <bool kDropout>
__device__ __forceinline__ uint32_t keepGroup(uint64_t seed, const Derived& dv, uint32_t batchHead, int i, int group) {
  return kDropout ? tile::dropoutKeepGroup(seed, batchHead, i, group, dv.threshold) : 0xfu;
}

// The kernels hold logits in base 2, log2(e) (scale q.k + bias), so that every exponential is
// one exp2f: a single ex2.approx.ftz instruction (CMakeLists compiles the kernel files with -ftz=true),
// where __expf is a multiply by log2(e) and an ex2.approx whose denormal handling adds more.
// The saved log-sum-exp is in base 2 too (ForwardArgs::lse).
constexpr float kLog2e = 1.4426950408889634f;

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

}  // namespace
}  // namespace xtrap::cuda
