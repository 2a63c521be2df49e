#pragma once
// The per-element and per-tile pieces of the fused ALiBi-family attention kernel
// (linear_bias_attention*.cu), written once for both compilers: nvcc builds them into the kernel,
// g++ into the torch-free tests (tests/test_linear_bias_tile.cpp) that check them against
// LinearBiasSpec::bias and against brute force. No CUDA and no LibTorch headers here.
//
// i = query position, j = key position, both absolute positions in the window [0, T).
#include <cmath>
#include <cstdint>

#ifdef __CUDACC__
#define XTRAP_HD __host__ __device__ __forceinline__
#else
#define XTRAP_HD inline
#endif

namespace xtrap::tile {

// One head of a LinearBiasSpec (linear_bias_spec.h) with the slopes in use now, in float32.
struct HeadBias {
  float slopePast = 0.f;
  float slopeFuture = 0.f;
  float firstTokenBias = 0.f;  // read only when hasFirstTokenBias
  float futureShift = 0.f;
  bool blockPast = false;
  bool blockFuture = false;  // decoders: every head blocks the future (causal)
  bool hasFirstTokenBias = false;
};

// Which term of the spec gives the bias of one (i, j), and the distance it multiplies:
//   Past:       bias = -slopePast   * distance, distance = i - j
//   Future:     bias = -slopeFuture * distance, distance = j - i - futureShift
//   FirstToken: bias = firstTokenBias (i == 0 or j == 0, when the head has one)
//   Diagonal:   bias = 0;  Blocked: bias = -inf
// The backward uses the same cell: dL/dslopePast += dS * (-distance) over Past cells, and so on.
enum class BiasTerm : int { Diagonal, Past, Future, FirstToken, Blocked };

struct BiasCell {
  BiasTerm term;
  float distance;  // Past and Future cells only, else 0
};

XTRAP_HD BiasCell biasCell(const HeadBias& hb, int i, int j) {
  if (hb.hasFirstTokenBias && (i == 0 || j == 0)) return {BiasTerm::FirstToken, 0.f};
  if (j < i) return hb.blockPast ? BiasCell{BiasTerm::Blocked, 0.f} : BiasCell{BiasTerm::Past, float(i - j)};
  if (j > i)
    return hb.blockFuture ? BiasCell{BiasTerm::Blocked, 0.f}
                          : BiasCell{BiasTerm::Future, float(j - i) - hb.futureShift};
  return {BiasTerm::Diagonal, 0.f};
}

XTRAP_HD float biasOf(const HeadBias& hb, BiasCell cell) {
  switch (cell.term) {
    case BiasTerm::Past:
      return -hb.slopePast * cell.distance;
    case BiasTerm::Future:
      return -hb.slopeFuture * cell.distance;
    case BiasTerm::FirstToken:
      return hb.firstTokenBias;
    case BiasTerm::Blocked:
      return -INFINITY;
    default:
      return 0.f;
  }
}

// The bias added to the (already scaled) logit of query i and key j: LinearBiasSpec::bias in float.
XTRAP_HD float linearBias(const HeadBias& hb, int i, int j) { return biasOf(hb, biasCell(hb, i, j)); }

// The logit of query i and key j from their dot product q_i . k_j: scale q_i . k_j + bias, and
// -inf past the sequence (the padding rows and columns of tail tiles) as on blocked cells.
XTRAP_HD float logit(const HeadBias& hb, float dot, float scale, int i, int j, int T) {
  return (i < T && j < T) ? dot * scale + linearBias(hb, i, j) : -INFINITY;
}

// A kernel block owns one tile of [0, T) on one axis and walks the tiles of the other: key tiles
// against its query rows (forward, dQ), or query tiles against its keys (dK, dV). Both axes are cut
// into tiles of one size from 0 (the sequence's last tile shorter), so that every pair of tiles but
// the diagonal's (the same tile on both axes) has all its cells on one side of the diagonal, the
// walk's order tells which: j < i (past) for key tiles before the block's query tile and for query
// tiles after its key tile. So visitsTile and linearTile (below) test the head's flags for that
// side, and the first-token row and column; tests of the tiles' corners against each other, as
// for any two rectangles, took the forward's loop some 40 instructions a step (SASS sm_90a, D 64).
enum class Walk : int { Keys, Queries };

// Whether the head blocks the cells of a walk's tiles before the block's own tile (`before`) or of
// those after it: the past (j < i) lies before a query tile among key tiles, after a key tile among
// query tiles.
XTRAP_HD bool blocksSide(const HeadBias& hb, Walk walk, bool before) {
  return (walk == Walk::Keys) == before ? hb.blockPast : hb.blockFuture;
}

// Whether a block that owns the tile at own0 visits the tile at t0 < T of the other axis (`walk`):
// whether the pair has a cell that is not blocked. The others are skipped: their probabilities are
// exactly 0. The diagonal's cells never are; another pair is blocked where its side is, except for
// first-token cells (row 0, column 0), which never are.
XTRAP_HD bool visitsTile(const HeadBias& hb, Walk walk, int own0, int t0) {
  if (t0 == own0) return true;
  return !blocksSide(hb, walk, t0 < own0) || (hb.hasFirstTokenBias && (own0 == 0 || t0 == 0));
}

// The tiles that a block owning the tile at own0 visits (visitsTile) among the tiles of [begin, end)
// of the other axis, begin <= own0 < end, all on the grid of `size`: the tiles of each side that
// its head does not block, its own, and tile 0 where only its first-token cells are open (a head
// with a first-token bias that blocks tile 0's side). That is a run of consecutive tiles, and tile
// 0 apart from it, so that a walk steps from one to the next without testing the tiles between:
// a loop testing each took some 10 instructions a step (SASS sm_90a).
struct OpenTiles {
  int first = 0, last = 0;  // the run: first, first + size, ..., last (the own tile among them)
  int lone = -1;            // 0 where tile 0 is visited apart from the run, else -1

  // The first tile of an ascending walk; the one after t; whether t is in the walk (not past last).
  XTRAP_HD int lowest() const { return lone == 0 ? 0 : first; }
  XTRAP_HD int next(int t, int size) const { return t + size > first ? t + size : first; }
  XTRAP_HD bool upTo(int t) const { return t <= last; }
  // The same descending, from last: the tile before t, or -1 after the lowest.
  XTRAP_HD int previous(int t, int size) const { return t > first ? t - size : (t == first ? lone : -1); }
};

XTRAP_HD OpenTiles openTiles(const HeadBias& hb, Walk walk, int own0, int size, int begin, int end) {
  const bool beforeBlocked = blocksSide(hb, walk, true);
  // The own tile at 0 holds row or column 0: with a first-token bias every pair has open cells.
  const bool afterBlocked = blocksSide(hb, walk, false) && !(hb.hasFirstTokenBias && own0 == 0);
  OpenTiles open;
  open.first = beforeBlocked ? own0 : begin;
  open.last = afterBlocked ? own0 : (end - 1) / size * size;
  open.lone = beforeBlocked && hb.hasFirstTokenBias && begin == 0 && own0 > 0 ? 0 : -1;
  return open;
}

// A tile pair whose every cell takes the same term of the bias, Past or Future, except cells of
// the diagonal whose bias that term's formula gives too (0: always for Past, for Future when
// futureShift is 0), cells of the other side when the head blocks it (masked: -inf), and the
// first-token cells of row 0 or column 0 (bialibi's; then nothing is masked); no padding cell. Its
// bias is linear in j - i, slope (j - i) + offset (Past: slope = slopePast, offset = 0; Future:
// slope = -slopeFuture, offset = slopeFuture futureShift), which the kernels compute in one FMA
// per cell instead of biasCell's branches (and a compare on a masked tile, or on a tile of row 0 or
// column 0, whose first-token cells take firstTokenBias instead), and so is the distance biasCell
// gives each open cell of the term: distanceSign (j - i) - distanceShift (Past: -1, 0; Future: 1,
// futureShift), the bias gradients' coefficient (0 on the diagonal; a masked cell's probability,
// so its every gradient term, is 0). Every pair off the diagonal band of a sequence is such unless
// its head blocks that side, and so are the diagonal band's pairs of heads that block one side
// (causal, one-sided) with no first-token bias.
struct LinearTile {
  bool linear = false;
  BiasTerm term = BiasTerm::Diagonal;  // where linear: Past or Future
  float slope = 0.f, offset = 0.f;
  float distanceSign = 0.f, distanceShift = 0.f;
  bool maskFuture = false, maskPast = false;  // cells with j > i (j < i) are -inf
  // Row 0 (column 0) is in the tile and its cells are first-token ones: bias firstTokenBias.
  bool firstTokenRow = false, firstTokenColumn = false;

  XTRAP_HD bool hasFirstTokenCells() const { return firstTokenRow || firstTokenColumn; }
};

// The pair of query rows [r0, r0 + size) and key columns [c0, c0 + size) of a sequence of T, on
// the tiles' grid (r0 and c0 multiples of size, size > 2: with a first-token bias, the diagonal's
// pair at 0 of size 2 has no cell of a term but its diagonal). A pair with a tail tile (past T) is
// not linear: the per-cell path masks its padding.
XTRAP_HD LinearTile linearTile(const HeadBias& hb, int r0, int c0, int size, int T) {
  LinearTile lt;
  if (r0 + size > T || c0 + size > T) return lt;
  const bool firstRow = hb.hasFirstTokenBias && r0 == 0, firstColumn = hb.hasFirstTokenBias && c0 == 0;
  bool past;
  if (r0 == c0) {
    // The diagonal's pair is of one term only where its head blocks the other side (masked), and
    // then holds no first-token cell (never blocked); of the Future term only without a shift,
    // whose formula gives the diagonal its 0.
    if (firstRow || hb.blockPast == hb.blockFuture) return lt;
    past = hb.blockFuture;
    if (!past && hb.futureShift != 0.f) return lt;
    lt.maskFuture = past;
    lt.maskPast = !past;
  } else {
    past = c0 < r0;
    if (past ? hb.blockPast : hb.blockFuture) return lt;  // visited only for its first-token cells
  }
  lt.linear = true;
  if (past) {
    lt.term = BiasTerm::Past;
    lt.slope = hb.slopePast;
    lt.distanceSign = -1.f;
  } else {
    lt.term = BiasTerm::Future;
    lt.slope = -hb.slopeFuture;
    lt.offset = hb.slopeFuture * hb.futureShift;
    lt.distanceSign = 1.f;
    lt.distanceShift = hb.futureShift;
  }
  lt.firstTokenRow = firstRow;
  lt.firstTokenColumn = firstColumn;
  return lt;
}

// ---- Negligible tiles: whose every probability underflows ----
//
// ALiBi's bias falls linearly with distance, so far from the diagonal a head's probabilities are
// below what fp32 can hold: with slope 0.5 (the first of 8 heads), keys some 200 tokens away are
// below e^-100 of the diagonal's. A tile pair whose every cell is provably that small changes no
// output (their sum is below the rounding of the others'), and the kernels leave such pairs out at
// both ends of each tile's walk (linear_bias_attention_forward.cu). The proof per pair, for every query i
// and key j of it, in natural units:
//   logit_ij - max_j' logit_ij' <= logit_ij - logit_ii                  (the diagonal is never blocked)
//                               <= scale |q_i| |k_j| + bias_ij - scale q_i.k_i    (Cauchy-Schwarz)
//                               <= scale Q K + maxBias - diagonal
// with Q, K the largest |q_i| of the query tile and |k_j| of the key tile, diagonal the smallest
// scale q_i.k_i of the query tile (TileBound, one per 64-row tile), and maxBias the bias of the
// pair's nearest cell. Where that is below kNegligibleLog2 / log2(e), every probability is below
// 2^kNegligibleLog2: the backward's exp2(logit - lse) of such a cell is 0 in fp32 (ex2.approx.ftz
// flushes what is below 2^-126), so skipping the pair there changes no bit, and the forward's sum
// and output lose less than 2^-136 of theirs.

// log2 of the largest probability of a negligible pair: 10 below fp32's smallest normal (2^-126),
// a margin that covers the rounding of the bound, of the norms and of the kernel's own logits.
constexpr float kNegligibleLog2 = -136.f;
constexpr float kNegligibleLogit = kNegligibleLog2 * 0.6931471805599453f;  // in natural units: -94.3

// What bounds the logits of one tile of rows [t0, min(T, t0 + 64)) of one head, from its q and k
// rows (padding rows past T left out).
struct alignas(16) TileBound {
  float queryNorm = 0.f;  // max |q_i|
  float keyNorm = 0.f;    // max |k_i|
  float diagonal = 0.f;   // min scale q_i . k_i: each row's logit on the diagonal, less its bias (0)
  float unused = 0.f;     // 16 bytes: one vector load
};

// Whether every probability of the pair of query rows [r0, r0 + size) and key columns [c0, c0 + size)
// (tiles of one grid, so off the diagonal they are apart by whole tiles) is below 2^kNegligibleLog2,
// by the bound above; rows, columns: the TileBounds of the query and the key tile. Never a pair
// with a diagonal cell or a first-token cell (bialibi's row and column 0: their bias is not the
// distance's), and never where a bound is not finite (a NaN or infinite q or k).
XTRAP_HD bool negligibleTile(const HeadBias& hb, int r0, int c0, int size, float scale, const TileBound& rows,
                             const TileBound& columns) {
  if (hb.hasFirstTokenBias && (r0 == 0 || c0 == 0)) return false;
  float maxBias;
  if (c0 + size <= r0)  // every j < i: the nearest cell is (r0, c0 + size - 1)
    maxBias = -hb.slopePast * float(r0 - (c0 + size - 1));
  else if (c0 >= r0 + size)  // every j > i: the nearest is (r0 + size - 1, c0)
    maxBias = -hb.slopeFuture * (float(c0 - (r0 + size - 1)) - hb.futureShift);
  else
    return false;
  // 2^-10 of the product for the rounding of the norms and of the kernel's dot products.
  const float bound = scale * rows.queryNorm * columns.keyNorm * (1.f + 0x1p-10f) + maxBias - rows.diagonal;
  return bound < kNegligibleLogit;  // false for NaN
}

// Whether some tile pair of a head can be negligible by its bias alone, in a sequence of T positions
// cut into tiles of `size`: whether the bias of the farthest pair's nearest cell is below
// kNegligibleLogit. negligibleTile needs that much of the bias wherever scale Q K
// is at least the query tile's smallest diagonal logit, which holds unless the query tile's own
// keys are longer than the far key tile's (Cauchy-Schwarz). For a head where it is not, the kernels
// skip nothing and read none of its q and k for bounds (tileBoundsKernel): at a training length
// (L 512, H 8) that is 6 heads of 8, whose bounds would cost more than they could save.
XTRAP_HD bool biasCanReachNegligible(const HeadBias& hb, int T, int size) {
  // The farthest pair: the first and the last tile, or with a first-token bias the second and the last.
  const int apart = (T + size - 1) / size - 1 - (hb.hasFirstTokenBias ? 1 : 0);
  if (apart < 1) return false;
  const float farthest = float(apart * size - (size - 1));  // its nearest cell's distance
  return (!hb.blockPast && -hb.slopePast * farthest < kNegligibleLogit) ||
         (!hb.blockFuture && -hb.slopeFuture * (farthest - hb.futureShift) < kNegligibleLogit);
}

// ---- Per cell: dropout, and the backward's gradients ----

// A value through dropout: scaled by keepScale = 1 / (1 - p) where kept, 0 where dropped. P~ from
// P (the forward's P~ V, the backward's dV = P~^T dO), and dP = dL/dP from dP~ = dO_i . v_j.
XTRAP_HD float afterDropout(float x, bool keep, float keepScale) { return keep ? x * keepScale : 0.f; }

// dS = dL/d(logit) of one cell (FlashAttention-2): P (dP - D_i), with dP the gradient through
// dropout of dPTilde = dO_i . v_j and D_i = rowsum(dO o O) = sum_j P_ij dP_ij. The bias is added
// to the logit unscaled, so dS is also dL/d(bias).
XTRAP_HD float scoreGrad(float prob, float dPTilde, bool keep, float keepScale, float rowDot) {
  return prob * (afterDropout(dPTilde, keep, keepScale) - rowDot);
}

// The bias gradients of a set of cells, from their dS and biasCell (the derivatives of biasOf):
// dL/dslopePast = sum of dS * (-distance) over Past cells, dL/dslopeFuture the same over Future
// cells, dL/dfirstTokenBias = sum of dS over FirstToken cells. Summed in the order of add().
template <typename F>
struct BiasGrads {
  F past = 0, future = 0, first = 0;

  XTRAP_HD void add(BiasCell cell, float dS) {
    if (cell.term == BiasTerm::Past) past -= dS * cell.distance;
    if (cell.term == BiasTerm::Future) future -= dS * cell.distance;
    if (cell.term == BiasTerm::FirstToken) first += dS;
  }
};

// The bias gradients' exact softmax row term. dS_ij = P_ij (dP_ij - D_i) with D_i = sum_j P_ij dP_ij,
// but the backward takes D_i = dO_i . O_i (FlashAttention-2), which the bf16 rounding of P~ in
// O = P~ V and of O itself moves by ~2^-9 relative. dQ and dK tolerate that; the bias gradients,
// sums of dS over cells whose row sums cancel, came out 1-2 % off (on the CPU emulation of the
// kernels, tests/test_linear_bias_attention_emulated.cpp). So the kernel also sums, per row and in
// fp32 from the cells it visits anyway, rowDot = sum_j P_ij dP_ij and weight = sum_j P_ij c_ij (c the
// cell's coefficient in each gradient, as in BiasGrads::add). With D'_i the value dS used,
// dS_ij = dS'_ij + P_ij (D'_i - rowDot_i), so each gradient gains (D'_i - rowDot_i) weight_i
// (addRowCorrection).
template <typename F>
struct RowTerm {
  F rowDot = 0;
  BiasGrads<F> weight;

  // dP: the cell's dL/dP, after dropout.
  XTRAP_HD void add(BiasCell cell, float prob, float dP) {
    rowDot += prob * dP;
    weight.add(cell, prob);
  }
};

// Corrects grads for one row whose dS used usedRowDot, given the row's whole RowTerm.
template <typename G, typename F>
XTRAP_HD void addRowCorrection(BiasGrads<G>& grads, const RowTerm<F>& row, float usedRowDot) {
  const G delta = G(usedRowDot) - G(row.rowDot);
  grads.past += delta * G(row.weight.past);
  grads.future += delta * G(row.weight.future);
  grads.first += delta * G(row.weight.first);
}

// The same gradients without any row's sum of P o dP, for a backward that sees each row in pieces
// (BackwardScheme::AtomicDq's key-tile blocks). With c_ij a cell's coefficient in a gradient (as in
// BiasGrads::add) and W_i = sum_j P_ij c_ij (RowTerm's weight, which the forward sums with the
// softmax), sum_j P_ij (dP_ij - rowDot_i) c_ij = sum_j P_ij dP_ij (c_ij - W_i): each cell adds
// u (c - W) with u = P dP, whatever the cells of its row elsewhere.
template <typename F>
struct CentredBiasGrads {
  F past = 0, future = 0, first = 0;

  // u: P dP of the cell (dP after dropout); rowWeight: its row's W for the three gradients.
  XTRAP_HD void add(BiasCell cell, float u, const BiasGrads<float>& rowWeight) {
    const float cPast = cell.term == BiasTerm::Past ? -cell.distance : 0.f;
    const float cFuture = cell.term == BiasTerm::Future ? -cell.distance : 0.f;
    const float cFirst = cell.term == BiasTerm::FirstToken ? 1.f : 0.f;
    past += u * (cPast - rowWeight.past);
    future += u * (cFuture - rowWeight.future);
    first += u * (cFirst - rowWeight.first);
  }
};

// ---- Dropout: a counter-based generator, so the backward regenerates the forward's mask ----

// Philox4x32-10 (Salmon et al., SC'11; Random123's constants): 4 random words for a 128-bit
// counter and a 64-bit key. Stateless, so each (head, i, j) has its own draw wherever it is needed.
XTRAP_HD void philox4x32(const uint32_t counter[4], const uint32_t key[2], uint32_t out[4]) {
  uint32_t c0 = counter[0], c1 = counter[1], c2 = counter[2], c3 = counter[3];
  uint32_t k0 = key[0], k1 = key[1];
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      k0 += 0x9E3779B9u;
      k1 += 0xBB67AE85u;
    }
    uint64_t p0 = uint64_t(0xD2511F53u) * c0, p1 = uint64_t(0xCD9E8D57u) * c2;
    uint32_t hi0 = uint32_t(p0 >> 32), lo0 = uint32_t(p0), hi1 = uint32_t(p1 >> 32), lo1 = uint32_t(p1);
    c0 = hi1 ^ c1 ^ k0;
    c1 = lo1;
    c2 = hi0 ^ c3 ^ k1;
    c3 = lo0;
  }
  out[0] = c0;
  out[1] = c1;
  out[2] = c2;
  out[3] = c3;
}

// Dropout drops a probability when its 24-bit uniform draw is below this threshold (p in [0, 1)).
inline uint32_t dropoutThreshold(double p) {
  double t = std::floor(p * 16777216.0 + 0.5);
  return t <= 0 ? 0u : (t >= 16777216.0 ? 16777216u : uint32_t(t));
}

// Dropout makes one Philox draw (4 words) per (batch*H + head, row i, key group). The 4 keys of
// group 4 m + u (u < 4) are j = 16 m + 2 u + {0, 1, 8, 9}, words 0 to 3: the keys that one lane
// holds in two adjacent 8-key fragments of the kernels' registers (warp_mma.cuh's C layout), so
// the forward and dQ use every word of a draw, and dK/dV (keys j and j + 8 of one query in one
// lane) two of them.
XTRAP_HD int dropoutGroup(int j) { return (j >> 4) * 4 + ((j >> 1) & 3); }
XTRAP_HD int dropoutWord(int j) { return (j & 1) | ((j >> 2) & 2); }

// The Philox draw of dropout's counter (group, i, batch*H + head) for this seed.
XTRAP_HD void dropoutDraw(uint64_t seed, uint32_t batchHead, int i, int group, uint32_t out[4]) {
  const uint32_t counter[4] = {uint32_t(group), uint32_t(i), batchHead, 0u};
  const uint32_t key[2] = {uint32_t(seed), uint32_t(seed >> 32)};
  philox4x32(counter, key, out);
}

// Whether one word of a draw keeps its probability: its top 24 bits, uniform, not below threshold.
XTRAP_HD bool keeps(uint32_t word, uint32_t threshold) { return (word >> 8) >= threshold; }

// Whether dropout keeps the probability of (batch*H + head, i, j) for this seed. threshold 0
// keeps everything without drawing.
XTRAP_HD bool dropoutKeep(uint64_t seed, uint32_t batchHead, int i, int j, uint32_t threshold) {
  if (threshold == 0) return true;
  uint32_t r[4];
  dropoutDraw(seed, batchHead, i, dropoutGroup(j), r);
  // A select rather than r[word]: a dynamic index would put r in the GPU's local memory.
  const int word = dropoutWord(j);
  return keeps((word & 2) ? ((word & 1) ? r[3] : r[2]) : ((word & 1) ? r[1] : r[0]), threshold);
}

// dropoutKeep of the 4 keys of one group of row i as bits, bit w for the key of word w: one draw.
XTRAP_HD uint32_t dropoutKeepGroup(uint64_t seed, uint32_t batchHead, int i, int group, uint32_t threshold) {
  if (threshold == 0) return 0xfu;
  uint32_t r[4];
  dropoutDraw(seed, batchHead, i, group, r);
  return uint32_t(keeps(r[0], threshold)) | uint32_t(keeps(r[1], threshold)) << 1 |
         uint32_t(keeps(r[2], threshold)) << 2 | uint32_t(keeps(r[3], threshold)) << 3;
}

}  // namespace xtrap::tile
