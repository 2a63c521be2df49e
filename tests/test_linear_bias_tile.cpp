// The host/device pieces of the fused ALiBi-family CUDA kernel (src/model/position/linear_bias_tile.h),
// checked on the CPU with the very code nvcc compiles into the kernel:
// - the per-cell bias against LinearBiasSpec::bias for every variant, and its gradient terms
//   against finite differences of LinearBiasSpec::bias;
// - the tile classification (blocked / unblocked / mixed) and the tiles a block's loop visits,
//   walking keys or queries, against brute force over each tile's cells, tail tiles included, and
//   the linear tiles (one open Past or Future term) against brute force and the spec's bias;
// - the negligible tiles (every probability below 2^-136 by their bounds) against brute force, and
//   the heads whose bias cannot make any pair negligible within T;
// - the warpgroup MMA's descriptor bits and core-matrix tile (core_matrix_tile.h), by hand;
// - Philox4x32-10 against Random123's known answers, and the dropout mask's rate;
// - the kernel's tile algorithm (skip blocked tiles, online softmax, saved log-sum-exp, the
//   FlashAttention-2 backward with dropout, bias gradients from dS) written out in plain loops with
//   the same helpers, against a double-precision reference that materialises the bias, and finite
//   differences of it for every gradient.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "cuda/core_matrix_tile.h"
#include "model/linear_bias_spec.h"
#include "model/position/linear_bias_tile.h"

using namespace xtrap;
using tile::BiasTerm;
using tile::HeadBias;

namespace {

struct Variant {
  const char* name;
  PositionMethod method;
  bool causal;
};
const std::vector<Variant> kVariants{
    {"alibi (decoder)", PositionMethod::Alibi, true},       {"alibi (encoder)", PositionMethod::Alibi, false},
    {"alibi-offset", PositionMethod::AlibiOffset, false},   {"alibi-onesided", PositionMethod::AlibiOneSided, false},
    {"alibi-learned", PositionMethod::AlibiLearned, false}, {"bialibi", PositionMethod::BiAlibi, false}};

// A first-token bias per head for bialibi (its initial value 0 would hide mistakes).
double firstTokenBiasOf(int64_t h) { return 0.7 - 0.45 * double(h); }

HeadBias headBiasOf(const LinearBiasSpec& spec, int64_t h) {
  HeadBias hb;
  hb.slopePast = float(spec.slopePast[h]);
  hb.slopeFuture = float(spec.slopeFuture[h]);
  hb.futureShift = float(spec.futureShift);
  hb.blockPast = spec.blockPast[h];
  hb.blockFuture = spec.blockFuture[h];
  hb.hasFirstTokenBias = spec.hasFirstTokenBias;
  hb.firstTokenBias = spec.hasFirstTokenBias ? float(firstTokenBiasOf(h)) : 0.f;
  return hb;
}

// A spec no variant has: random slopes, blocks, shift and first-token bias per draw.
LinearBiasSpec randomSpec(std::mt19937& rng, int64_t heads) {
  std::uniform_real_distribution<double> slope(0.0, 1.0);
  std::bernoulli_distribution coin(0.5);
  LinearBiasSpec spec;
  for (int64_t h = 0; h < heads; ++h) {
    spec.slopePast.push_back(slope(rng));
    spec.slopeFuture.push_back(slope(rng));
    spec.blockPast.push_back(coin(rng));
    spec.blockFuture.push_back(coin(rng));
  }
  spec.futureShift = coin(rng) ? 0.0 : slope(rng);
  spec.hasFirstTokenBias = coin(rng);
  return spec;
}

// Every variant at H = 8 and H = 12, then random specs.
std::vector<std::pair<std::string, LinearBiasSpec>> allSpecs() {
  std::vector<std::pair<std::string, LinearBiasSpec>> specs;
  for (const auto& v : kVariants)
    for (int64_t H : {8, 12})
      specs.emplace_back(std::string(v.name) + " H=" + std::to_string(H), makeLinearBiasSpec(v.method, H, v.causal));
  std::mt19937 rng(23);
  for (int n = 0; n < 20; ++n) specs.emplace_back("random spec " + std::to_string(n), randomSpec(rng, 4));
  return specs;
}

bool isBlocked(float bias) { return std::isinf(bias) && bias < 0; }

}  // namespace

TEST_CASE("the kernel's per-cell bias is LinearBiasSpec::bias for every variant") {
  const int T = 13;
  for (const auto& [name, spec] : allSpecs()) {
    double worst = 0.0;
    for (int64_t h = 0; h < spec.heads(); ++h) {
      HeadBias hb = headBiasOf(spec, h);
      for (int i = 0; i < T; ++i)
        for (int j = 0; j < T; ++j) {
          double expected = spec.bias(h, i, j, firstTokenBiasOf(h));
          float got = tile::linearBias(hb, i, j);
          bool blockedAgree =
              std::isinf(expected) == (isBlocked(got) && tile::biasCell(hb, i, j).term == BiasTerm::Blocked);
          if (!blockedAgree || (!std::isinf(expected) && !std::isfinite(got)))
            FAIL(name << " head " << h << " (i, j) = (" << i << ", " << j << "): spec " << expected << ", kernel "
                      << got);
          if (!std::isinf(expected))
            worst = std::max(worst, std::abs(double(got) - expected) / std::max(1.0, std::abs(expected)));
        }
    }
    INFO(name << ": largest relative difference " << worst);
    CHECK(worst < 1e-6);
  }
}

TEST_CASE("the kernel's bias-gradient terms are the derivatives of LinearBiasSpec::bias") {
  // d bias / d slopePast = -distance on Past cells, d / d slopeFuture = -distance on Future
  // cells, d / d firstTokenBias = 1 on FirstToken cells, all else 0: central differences.
  const int T = 9;
  const double eps = 1e-3;
  for (const auto& [name, spec] : allSpecs()) {
    for (int64_t h = 0; h < spec.heads(); ++h) {
      HeadBias hb = headBiasOf(spec, h);
      auto moved = [&](int which, double delta) {
        LinearBiasSpec s = spec;
        if (which == 0) s.slopePast[h] += delta;
        if (which == 1) s.slopeFuture[h] += delta;
        return s;
      };
      LinearBiasSpec pastUp = moved(0, eps), pastDown = moved(0, -eps);
      LinearBiasSpec futureUp = moved(1, eps), futureDown = moved(1, -eps);
      double ftb = firstTokenBiasOf(h);
      for (int i = 0; i < T; ++i)
        for (int j = 0; j < T; ++j) {
          tile::BiasCell cell = tile::biasCell(hb, i, j);
          if (cell.term == BiasTerm::Blocked) continue;
          double dPast = (pastUp.bias(h, i, j, ftb) - pastDown.bias(h, i, j, ftb)) / (2 * eps);
          double dFuture = (futureUp.bias(h, i, j, ftb) - futureDown.bias(h, i, j, ftb)) / (2 * eps);
          double dFirst = (spec.bias(h, i, j, ftb + eps) - spec.bias(h, i, j, ftb - eps)) / (2 * eps);
          INFO(name << " head " << h << " (i, j) = (" << i << ", " << j << ")");
          CHECK(dPast == Approx(cell.term == BiasTerm::Past ? -cell.distance : 0.0).margin(1e-9));
          CHECK(dFuture == Approx(cell.term == BiasTerm::Future ? -cell.distance : 0.0).margin(1e-9));
          CHECK(dFirst == Approx(cell.term == BiasTerm::FirstToken ? 1.0 : 0.0).margin(1e-9));
        }
    }
  }
}

TEST_CASE("the tiles a block visits against brute force, tail tiles included") {
  // A pair is visited when one of its cells is not blocked; the pairs of both walks (a query tile's
  // key tiles, a key tile's query tiles) on one grid of square tiles.
  int skipped = 0, visitedInPart = 0, visitedWhole = 0;
  for (const auto& [name, spec] : allSpecs())
    for (int64_t h = 0; h < spec.heads(); ++h) {
      HeadBias hb = headBiasOf(spec, h);
      for (int T : {1, 2, 7, 13, 64, 100})
        for (int size : {1, 2, 4, 5, 64})
          for (int r0 = 0; r0 < T; r0 += size)
            for (int c0 = 0; c0 < T; c0 += size) {
              int r1 = std::min(T, r0 + size), c1 = std::min(T, c0 + size);
              int blocked = 0, cells = (r1 - r0) * (c1 - c0);
              for (int i = r0; i < r1; ++i)
                for (int j = c0; j < c1; ++j) blocked += isBlocked(tile::linearBias(hb, i, j));
              const bool open = blocked < cells;
              (!open ? skipped : blocked > 0 ? visitedInPart : visitedWhole) += 1;
              if (tile::visitsTile(hb, tile::Walk::Keys, r0, c0) != open ||
                  tile::visitsTile(hb, tile::Walk::Queries, c0, r0) != open)
                FAIL(name << " head " << h << " T " << T << " tile rows [" << r0 << ", " << r1 << ") cols [" << c0
                          << ", " << c1 << "): " << blocked << " of " << cells << " cells blocked, "
                          << (open ? "skipped, but a cell is open" : "visited, but every cell is blocked"));
            }
    }
  // Pairs of each kind occur (a test answering "visited" everywhere would pass the checks above
  // only where no pair is fully blocked).
  CHECK(skipped > 0);
  CHECK(visitedInPart > 0);
  CHECK(visitedWhole > 0);
}

TEST_CASE("a walk steps through the tiles it visits, and only those, either way, tail tiles included") {
  // Brute force: the tiles of [begin, end) whose pair visitsTile says is open; the walks of
  // OpenTiles from either end must give them in order.
  int walks = 0, withZero = 0, skippingTiles = 0;
  for (const auto& [name, spec] : allSpecs())
    for (int64_t h = 0; h < spec.heads(); ++h) {
      HeadBias hb = headBiasOf(spec, h);
      for (int T : {1, 2, 7, 13, 64, 100})
        for (int size : {1, 3, 4, 64})
          for (int own0 = 0; own0 < T; own0 += size)
            for (const tile::Walk walk : {tile::Walk::Keys, tile::Walk::Queries})
              // [begin, end) as the tile walks give them (a visited tile at each end, or the whole axis).
              for (int begin : {0, own0 / size / 2 * size, own0})
                for (int end : {own0 + size, (own0 / size + (T / size - own0 / size) / 2 + 1) * size, T}) {
                  if (end <= own0) continue;
                  std::vector<int> expected, up, down;
                  for (int t = begin; t < std::min(end, T); t += size)
                    if (tile::visitsTile(hb, walk, own0, t)) expected.push_back(t);
                  const tile::OpenTiles open = tile::openTiles(hb, walk, own0, size, begin, end);
                  for (int t = open.lowest(); open.upTo(t) && up.size() <= expected.size(); t = open.next(t, size))
                    up.push_back(t);
                  for (int t = open.last; t >= 0 && down.size() <= expected.size(); t = open.previous(t, size))
                    down.push_back(t);
                  std::reverse(down.begin(), down.end());
                  if (up != expected || down != expected)
                    FAIL(name << " head " << h << " T " << T << " tiles of " << size << ", own tile " << own0
                              << (walk == tile::Walk::Keys ? ", walking keys" : ", walking queries") << " in [" << begin
                              << ", " << end << "): " << expected.size() << " tiles open, the walks give " << up.size()
                              << " up, " << down.size() << " down");
                  ++walks;
                  withZero += open.lone == 0;
                  skippingTiles +=
                      !expected.empty() && expected.back() - expected.front() + size > int(expected.size()) * size;
                }
    }
  INFO(walks << " walks");
  // Both of OpenTiles' shapes occur: a run alone, and tile 0 apart from it (blocked tiles between).
  CHECK(withZero > 0);
  CHECK(skippingTiles > 0);
}

TEST_CASE(
    "linear tiles: exactly the tiles of one open Past or Future term (the diagonal, a blocked other side or "
    "first-token cells allowed, not both), their bias slope (j - i) + offset, -inf where masked or the first-token "
    "bias, their distance distanceSign (j - i) - distanceShift") {
  int linear = 0, masked = 0, withFirstToken = 0, general = 0;
  for (const auto& [name, spec] : allSpecs())
    for (int64_t h = 0; h < spec.heads(); ++h) {
      HeadBias hb = headBiasOf(spec, h);
      for (int T : {7, 64, 100, 200})
        for (int size : {3, 4, 64})
          for (int r0 = 0; r0 < T; r0 += size)
            for (int c0 = 0; c0 < T; c0 += size) {
              // Brute force, for each term: every cell inside the sequence, and of that term, or on the
              // diagonal where the term's formula gives its 0 (Past; Future without a shift), or blocked
              // on the other side, or a first-token cell (but not blocked cells and first-token cells
              // in one tile); one cell at least of that term.
              auto allOf = [&](BiasTerm want) {
                bool open = false, blocked = false, first = false;
                for (int i = r0; i < r0 + size; ++i)
                  for (int j = c0; j < c0 + size; ++j) {
                    if (i >= T || j >= T) return false;
                    const BiasTerm term = tile::biasCell(hb, i, j).term;
                    const bool otherSide = want == BiasTerm::Past ? j > i : j < i;
                    const bool diagonalFits = want == BiasTerm::Past || spec.futureShift == 0.0;
                    blocked = blocked || term == BiasTerm::Blocked;
                    first = first || term == BiasTerm::FirstToken;
                    if ((term == BiasTerm::Blocked && otherSide) || term == BiasTerm::FirstToken) continue;
                    if (!(term == want || (term == BiasTerm::Diagonal && diagonalFits))) return false;
                    open = true;
                  }
                return open && !(blocked && first);
              };
              const bool past = allOf(BiasTerm::Past), future = allOf(BiasTerm::Future);
              const tile::LinearTile lt = tile::linearTile(hb, r0, c0, size, T);
              INFO(name << " head " << h << " T " << T << " tile (" << r0 << ", " << c0 << ") of " << size);
              REQUIRE(lt.linear == (past || future));
              const bool firstTokens = lt.firstTokenRow || lt.firstTokenColumn;
              (lt.linear ? (lt.maskPast || lt.maskFuture ? masked
                            : firstTokens                ? withFirstToken
                                                         : linear)
                         : general) += 1;
              if (!lt.linear) continue;
              CHECK(lt.term == (past ? BiasTerm::Past : BiasTerm::Future));
              CHECK(lt.firstTokenRow == (spec.hasFirstTokenBias && r0 == 0));
              CHECK(lt.firstTokenColumn == (spec.hasFirstTokenBias && c0 == 0));
              double worst = 0, worstDistance = 0;
              bool sameAsCell = true, maskRight = true, firstRight = true;
              for (int i = r0; i < r0 + size; ++i)
                for (int j = c0; j < c0 + size; ++j) {
                  const double expected = spec.bias(h, i, j, firstTokenBiasOf(h));
                  if ((lt.maskFuture && j > i) || (lt.maskPast && j < i)) {
                    maskRight = maskRight && std::isinf(expected) && expected < 0;
                    continue;
                  }
                  if ((lt.firstTokenRow && i == 0) || (lt.firstTokenColumn && j == 0)) {
                    firstRight = firstRight && float(expected) == hb.firstTokenBias;
                    continue;
                  }
                  const double got = double(lt.slope) * (j - i) + double(lt.offset);
                  worst = std::max(worst, std::abs(got - expected) / std::max(1.0, std::abs(expected)));
                  // The distance of the spec's formula, i - j for Past and j - i - shift for Future, and
                  // exactly biasCell's (in float, as the kernels compute both; 0 on the diagonal).
                  const double distance = past ? i - j : j - i - double(spec.futureShift);
                  const float gotDistance = std::fma(lt.distanceSign, float(j - i), -lt.distanceShift);
                  worstDistance = std::max(
                      worstDistance, std::abs(double(gotDistance) - distance) / std::max(1.0, std::abs(distance)));
                  sameAsCell = sameAsCell && gotDistance == tile::biasCell(hb, i, j).distance;
                }
              CHECK(worst < 1e-6);
              CHECK(worstDistance < 1e-6);
              CHECK(sameAsCell);
              CHECK(maskRight);  // masked cells are exactly blocked ones
              CHECK(firstRight);
            }
    }
  CHECK(linear > 0);
  CHECK(masked > 0);
  CHECK(withFirstToken > 0);
  CHECK(general > 0);
}

// negligibleTile against brute force: every pair it flags has every probability below
// 2^kNegligibleLog2, computed in double from the materialised bias and the row's true maximum;
// it flags pairs (steep slopes, as a long sequence's far tiles are for ALiBi's), never one with a
// diagonal or first-token cell, nor one whose bounds are not finite.
TEST_CASE("negligible tiles: every probability of a flagged pair is below 2^-136, by brute force") {
  constexpr int T = 160, D = 16, kSize = 16;
  constexpr float kScale = 0.25f;
  std::mt19937 rng(41);
  std::uniform_real_distribution<float> uniform(-1.f, 1.f);
  int flagged = 0, pairs = 0;
  for (auto [name, spec] : allSpecs()) {
    // Steeper than ALiBi's, so that pairs a few 16-row tiles apart underflow.
    for (double& m : spec.slopePast) m *= 16.0;
    for (double& m : spec.slopeFuture) m *= 16.0;
    for (int64_t h = 0; h < spec.heads(); ++h) {
      const HeadBias hb = headBiasOf(spec, h);
      // q and k, row norms from 0 to 2 (a row scaled down, a row scaled up) per draw.
      std::vector<float> q(T * D), k(T * D);
      for (int t = 0; t < T; ++t) {
        const float rowScale = 2.f * float(t % 7) / 6.f;
        for (int d = 0; d < D; ++d) q[t * D + d] = rowScale * uniform(rng), k[t * D + d] = uniform(rng);
      }
      auto dot = [&](int i, int j) {
        double s = 0;
        for (int d = 0; d < D; ++d) s += double(q[i * D + d]) * k[j * D + d];
        return s;
      };
      auto norm = [&](const std::vector<float>& x, int t) {
        double s = 0;
        for (int d = 0; d < D; ++d) s += double(x[t * D + d]) * x[t * D + d];
        return std::sqrt(s);
      };
      auto logit = [&](int i, int j) { return kScale * dot(i, j) + spec.bias(h, i, j, firstTokenBiasOf(h)); };
      // Each tile's bounds, as the kernels' tileBoundsKernel computes them.
      std::vector<tile::TileBound> bounds(T / kSize);
      for (int t = 0; t < T; ++t) {
        tile::TileBound& b = bounds[size_t(t / kSize)];
        if (t % kSize == 0) b.diagonal = INFINITY;
        b.queryNorm = std::max(b.queryNorm, float(norm(q, t)));
        b.keyNorm = std::max(b.keyNorm, float(norm(k, t)));
        b.diagonal = std::min(b.diagonal, float(kScale * dot(t, t)));
      }
      for (int r0 = 0; r0 < T; r0 += kSize)
        for (int c0 = 0; c0 < T; c0 += kSize) {
          ++pairs;
          const tile::TileBound &rows = bounds[size_t(r0 / kSize)], &columns = bounds[size_t(c0 / kSize)];
          if (!tile::negligibleTile(hb, r0, c0, kSize, kScale, rows, columns)) continue;
          ++flagged;
          INFO(name << " head " << h << " tile rows " << r0 << " columns " << c0);
          CHECK((r0 >= c0 + kSize || c0 >= r0 + kSize));  // no diagonal cell
          CHECK(!(spec.hasFirstTokenBias && (r0 == 0 || c0 == 0)));
          double worst = -INFINITY;  // of log2 P_ij over the pair's cells
          for (int i = r0; i < r0 + kSize; ++i) {
            double rowMax = -INFINITY;
            for (int j = 0; j < T; ++j) rowMax = std::max(rowMax, logit(i, j));
            for (int j = c0; j < c0 + kSize; ++j) worst = std::max(worst, (logit(i, j) - rowMax) / std::log(2.0));
          }
          CHECK(worst < double(tile::kNegligibleLog2));
          // Not finite bounds (a NaN or infinite q or k) flag nothing.
          tile::TileBound nanRows = rows, infiniteColumns = columns;
          nanRows.queryNorm = NAN, infiniteColumns.keyNorm = INFINITY;
          CHECK_FALSE(tile::negligibleTile(hb, r0, c0, kSize, kScale, nanRows, columns));
          CHECK_FALSE(tile::negligibleTile(hb, r0, c0, kSize, kScale, rows, infiniteColumns));
        }
    }
  }
  INFO(flagged << " of " << pairs << " pairs flagged");
  CHECK(flagged > pairs / 10);
}

// biasCanReachNegligible against brute force: whether the largest bias of some pair of tiles off the
// diagonal band (the spec's bias at every cell; blocked pairs, and row and column 0 pairs with a
// first-token bias, left out) is below 136 ln 2 below 0; and where it is not, negligibleTile flags
// no open pair of that head for any bounds whose query tile's smallest diagonal logit is at most
// scale Q K.
TEST_CASE("negligible tiles: a head whose bias cannot reach the bound within T, by brute force") {
  constexpr int kSize = 16;
  constexpr float kScale = 0.25f;
  const double limit = double(tile::kNegligibleLog2) * std::log(2.0);
  std::mt19937 rng(43);
  std::uniform_real_distribution<float> unit(0.f, 1.f);
  int reaching = 0, notReaching = 0;
  // And specs at the edge: at T 333 (21 tiles) the farthest pair's nearest cell is 305 apart, 289
  // with a first-token bias, and its future distance less the shift; slopes that reach the bound a
  // quarter of a token either side of those, and of the tile starts' distance (320).
  std::vector<std::pair<std::string, LinearBiasSpec>> specs = allSpecs();
  for (double distance : {288.75, 289.25, 304.25, 304.75, 305.25, 319.75, 320.25})
    for (bool first : {false, true})
      for (double shift : {0.0, 0.5}) {
        LinearBiasSpec edge;
        edge.slopePast = {-limit / distance, 0.0};
        edge.slopeFuture = {0.0, -limit / distance};
        edge.blockPast = {false, true};
        edge.blockFuture = {true, false};
        edge.futureShift = shift, edge.hasFirstTokenBias = first;
        specs.emplace_back(
            "edge " + std::to_string(distance) + (first ? " first" : "") + " shift " + std::to_string(shift), edge);
      }
  for (auto [name, spec] : specs)
    for (int T : {1, 16, 17, 100, 333}) {
      for (int64_t h = 0; h < spec.heads(); ++h) {
        double lowestMax = INFINITY;  // over the open pairs, of the pair's largest bias
        std::vector<std::pair<int, int>> open;
        for (int r0 = 0; r0 < T; r0 += kSize)
          for (int c0 = 0; c0 < T; c0 += kSize) {
            if (std::abs(r0 - c0) < kSize || (spec.hasFirstTokenBias && (r0 == 0 || c0 == 0))) continue;
            double largest = -INFINITY;
            for (int i = r0; i < std::min(T, r0 + kSize); ++i)
              for (int j = c0; j < std::min(T, c0 + kSize); ++j)
                largest = std::max(largest, spec.bias(h, i, j, firstTokenBiasOf(h)));
            if (largest == -INFINITY) continue;  // blocked: the kernels never visit it
            lowestMax = std::min(lowestMax, largest);
            open.emplace_back(r0, c0);
          }
        const HeadBias hb = headBiasOf(spec, h);
        const bool reaches = tile::biasCanReachNegligible(hb, T, kSize);
        INFO(name << " head " << h << " T " << T << ": lowest largest bias of a pair " << lowestMax);
        CHECK(reaches == (lowestMax < limit));
        (reaches ? reaching : notReaching) += 1;
        if (reaches) continue;
        for (auto [r0, c0] : open) {
          tile::TileBound rows, columns;
          rows.queryNorm = 3.f * unit(rng), columns.keyNorm = 3.f * unit(rng);
          rows.diagonal = kScale * rows.queryNorm * columns.keyNorm * (2.f * unit(rng) - 1.f);
          CHECK_FALSE(tile::negligibleTile(hb, r0, c0, kSize, kScale, rows, columns));
        }
      }
    }
  INFO(reaching << " heads reach the bound, " << notReaching << " do not");
  CHECK(reaching > 20);
  CHECK(notReaching > 20);
}

// The warpgroup MMA's descriptor and tile (core_matrix_tile.h), against the PTX ISA's "Matrix
// Descriptor Format" bit by bit (address, leading and stride byte offsets in 16-byte units at bits 0,
// 16 and 32, 14 bits each; base offset and swizzle mode zero) and its core matrices (8 rows of 16
// contiguous bytes), worked out by hand.
TEST_CASE("core-matrix tiles: the descriptor's bits and the elements' places") {
  using namespace xtrap::cuda::core;
  CHECK(descriptor(0x1230, 1024, 128) == 0x0000'0008'0040'0123ULL);
  CHECK(descriptor(0x3FFF0, 0x3FFF0, 0x3FFF0) == 0x0000'3FFF'3FFF'3FFFULL);
  CHECK(descriptor(0, 128, 1024) == 0x0000'0040'0008'0000ULL);
  CHECK(kRowGroupBytes == 128);
  CHECK(kChunkBytes == 1024);
  // (row, column) -> element: a row's 8 columns of a chunk contiguous, rows of a core matrix 8
  // elements (16 bytes) apart, row groups 64 elements (128 bytes), chunks 512 (1024 bytes).
  CHECK(offset(0, 0) == 0);
  CHECK(offset(0, 7) == 7);
  CHECK(offset(1, 0) == 8);
  CHECK(offset(7, 7) == 63);
  CHECK(offset(8, 0) == 64);
  CHECK(offset(0, 8) == 512);
  CHECK(offset(9, 17) == 2 * 512 + 64 + 8 + 1);
  CHECK(offset(63, 127) == 15 * 512 + 7 * 64 + 7 * 8 + 7);
  // A descriptor advanced by whole core-matrix rows is the descriptor of the address further on.
  for (int elements : {0, 8, 64, 512, 1024, 4096, 8192})
    CHECK(advanced(descriptor(0x2400, 1024, 128), elements) == descriptor(0x2400 + 2 * elements, 1024, 128));
  // A 64 x 64 tile fills 4096 elements, each once.
  std::vector<int> hits(64 * 64);
  for (int row = 0; row < 64; ++row)
    for (int column = 0; column < 64; ++column) ++hits[size_t(offset(row, column))];
  CHECK(std::all_of(hits.begin(), hits.end(), [](int h) { return h == 1; }));
}

TEST_CASE("Philox4x32-10 gives Random123's known answers") {
  struct Kat {
    uint32_t counter[4], key[2], expected[4];
  };
  const Kat kats[] = {
      {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}},
      {{0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu},
       {0xffffffffu, 0xffffffffu},
       {0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}},
      {{0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u},
       {0xa4093822u, 0x299f31d0u},
       {0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}},
  };
  for (const Kat& kat : kats) {
    uint32_t out[4];
    tile::philox4x32(kat.counter, kat.key, out);
    for (int w = 0; w < 4; ++w) CHECK(out[w] == kat.expected[w]);
  }
}

TEST_CASE("the dropout mask: its rate, and the same mask for the same seed only") {
  const double p = 0.1;
  const uint32_t threshold = tile::dropoutThreshold(p);
  CHECK(tile::dropoutThreshold(0.0) == 0u);
  CHECK(threshold == uint32_t(std::lround(p * 16777216.0)));
  int64_t kept = 0, cells = 0, sameSeedDiffers = 0, otherSeedDiffers = 0, otherHeadDiffers = 0;
  for (int i = 0; i < 300; ++i)
    for (int j = 0; j < 300; ++j) {
      bool keep = tile::dropoutKeep(42, 3, i, j, threshold);
      kept += keep;
      ++cells;
      sameSeedDiffers += keep != tile::dropoutKeep(42, 3, i, j, threshold);
      otherSeedDiffers += keep != tile::dropoutKeep(43, 3, i, j, threshold);
      otherHeadDiffers += keep != tile::dropoutKeep(42, 4, i, j, threshold);
      REQUIRE(tile::dropoutKeep(42, 3, i, j, 0));  // p = 0 keeps every cell
    }
  double rate = double(kept) / double(cells);
  INFO("kept " << rate << " of " << cells << " cells at p = " << p);
  CHECK(std::abs(rate - (1 - p)) < 0.005);  // binomial sd 0.001
  CHECK(sameSeedDiffers == 0);
  // Two independent masks differ on 2 p (1 - p) = 18% of the cells.
  CHECK(std::abs(double(otherSeedDiffers) / double(cells) - 2 * p * (1 - p)) < 0.01);
  CHECK(std::abs(double(otherHeadDiffers) / double(cells) - 2 * p * (1 - p)) < 0.01);
}

namespace {

// One head's attention inputs: q, k, v, the output gradient g = dL/do, all (T, D), row-major.
struct Head {
  int T, D;
  std::vector<double> q, k, v, g;
};

Head randomHead(std::mt19937& rng, int T, int D) {
  std::normal_distribution<double> normal(0.0, 1.0);
  Head x{T, D, {}, {}, {}, {}};
  for (auto* t : {&x.q, &x.k, &x.v, &x.g})
    for (int n = 0; n < T * D; ++n) t->push_back(normal(rng));
  return x;
}

// The reference: the (T, T) bias materialised from the spec in double, softmax, the kernel's
// dropout mask, values. Returns the loss sum(o * g).
double referenceLoss(const Head& x, const LinearBiasSpec& spec, int64_t h, double ftb, double scale, double p,
                     uint64_t seed) {
  const uint32_t threshold = tile::dropoutThreshold(p);
  double loss = 0.0;
  std::vector<double> logits(x.T);
  for (int i = 0; i < x.T; ++i) {
    double rowMax = -std::numeric_limits<double>::infinity();
    for (int j = 0; j < x.T; ++j) {
      double dot = 0.0;
      for (int d = 0; d < x.D; ++d) dot += x.q[i * x.D + d] * x.k[j * x.D + d];
      logits[j] = scale * dot + spec.bias(h, i, j, ftb);
      rowMax = std::max(rowMax, logits[j]);
    }
    double sum = 0.0;
    for (int j = 0; j < x.T; ++j) sum += std::exp(logits[j] - rowMax);
    for (int j = 0; j < x.T; ++j) {
      double prob = std::exp(logits[j] - rowMax) / sum;
      if (!tile::dropoutKeep(seed, uint32_t(h), i, j, threshold)) continue;
      prob /= 1.0 - p;
      for (int d = 0; d < x.D; ++d) loss += prob * x.v[j * x.D + d] * x.g[i * x.D + d];
    }
  }
  return loss;
}

struct TiledResult {
  std::vector<float> o, lse, dq, dk, dv;
  tile::BiasGrads<double> biasGrads;
  int skippedTiles = 0;
};

// The kernel's algorithm in plain loops, float32 like the kernel, with its helpers:
// tiles of `tileSize` queries x keys, blocked tiles skipped, online softmax, saved log-sum-exp;
// backward from the log-sum-exp: D_i = rowsum(dO o O), dS = P (dP - D_i), bias gradients from dS.
TiledResult tiledAttention(const Head& x, const HeadBias& hb, uint32_t batchHead, float scale, float p, uint64_t seed,
                           int tileSize) {
  const int T = x.T, D = x.D;
  const uint32_t threshold = tile::dropoutThreshold(p);
  const float keepScale = 1.f / (1.f - p);
  auto at = [D](const std::vector<double>& t, int row, int d) { return float(t[row * D + d]); };
  auto logit = [&](int i, int j) {
    float dot = 0.f;
    for (int d = 0; d < D; ++d) dot += at(x.q, i, d) * at(x.k, j, d);
    return tile::logit(hb, dot, scale, i, j, T);
  };
  TiledResult r;
  r.o.assign(T * D, 0.f), r.lse.assign(T, 0.f), r.dq.assign(T * D, 0.f), r.dk.assign(T * D, 0.f);
  r.dv.assign(T * D, 0.f);
  for (int r0 = 0; r0 < T; r0 += tileSize) {
    const int r1 = std::min(T, r0 + tileSize);
    std::vector<float> rowMax(r1 - r0, -INFINITY), rowSum(r1 - r0, 0.f), acc((r1 - r0) * D, 0.f);
    for (int c0 = 0; c0 < T; c0 += tileSize) {
      const int c1 = std::min(T, c0 + tileSize);
      if (!tile::visitsTile(hb, tile::Walk::Keys, r0, c0)) {
        ++r.skippedTiles;
        continue;
      }
      for (int i = r0; i < r1; ++i) {
        std::vector<float> s(c1 - c0);
        float tileMax = -INFINITY;
        for (int j = c0; j < c1; ++j) tileMax = std::max(tileMax, s[j - c0] = logit(i, j));
        float newMax = std::max(rowMax[i - r0], tileMax);
        bool empty = newMax == -INFINITY;
        float alpha = empty ? 1.f : std::exp(rowMax[i - r0] - newMax);
        for (int d = 0; d < D; ++d) acc[(i - r0) * D + d] *= alpha;
        rowSum[i - r0] *= alpha;
        for (int j = c0; j < c1; ++j) {
          float prob = empty ? 0.f : std::exp(s[j - c0] - newMax);
          rowSum[i - r0] += prob;
          const float kept = tile::afterDropout(prob, tile::dropoutKeep(seed, batchHead, i, j, threshold), keepScale);
          for (int d = 0; d < D; ++d) acc[(i - r0) * D + d] += kept * at(x.v, j, d);
        }
        rowMax[i - r0] = newMax;
      }
    }
    for (int i = r0; i < r1; ++i) {
      for (int d = 0; d < D; ++d) r.o[i * D + d] = acc[(i - r0) * D + d] / rowSum[i - r0];
      r.lse[i] = rowMax[i - r0] + std::log(rowSum[i - r0]);
    }
  }
  std::vector<float> rowDot(T, 0.f);
  for (int i = 0; i < T; ++i)
    for (int d = 0; d < D; ++d) rowDot[i] += at(x.g, i, d) * r.o[i * D + d];
  // Like the kernel's keyGrad: each key tile walks the query tiles.
  for (int c0 = 0; c0 < T; c0 += tileSize)
    for (int r0 = 0; r0 < T; r0 += tileSize) {
      const int r1 = std::min(T, r0 + tileSize), c1 = std::min(T, c0 + tileSize);
      if (!tile::visitsTile(hb, tile::Walk::Queries, c0, r0)) continue;
      for (int i = r0; i < r1; ++i)
        for (int j = c0; j < c1; ++j) {
          float prob = std::exp(logit(i, j) - r.lse[i]);
          bool keep = tile::dropoutKeep(seed, batchHead, i, j, threshold);
          float dPDropped = 0.f;
          for (int d = 0; d < D; ++d) dPDropped += at(x.g, i, d) * at(x.v, j, d);
          float dS = tile::scoreGrad(prob, dPDropped, keep, keepScale, rowDot[i]);
          for (int d = 0; d < D; ++d) {
            r.dq[i * D + d] += scale * dS * at(x.k, j, d);
            r.dk[j * D + d] += scale * dS * at(x.q, i, d);
            r.dv[j * D + d] += tile::afterDropout(prob, keep, keepScale) * at(x.g, i, d);
          }
          r.biasGrads.add(tile::biasCell(hb, i, j), dS);
        }
    }
  return r;
}

// Largest |got - expected| over the largest |expected| (at least 1); infinite for a NaN.
double relativeError(const std::vector<float>& got, const std::vector<double>& expected) {
  double worst = 0.0, size = 1.0;
  for (size_t n = 0; n < got.size(); ++n) {
    double difference = std::abs(double(got[n]) - expected[n]);
    if (std::isnan(difference)) return std::numeric_limits<double>::infinity();
    worst = std::max(worst, difference);
    size = std::max(size, std::abs(expected[n]));
  }
  return worst / size;
}

}  // namespace

TEST_CASE("the kernel's tile algorithm equals materialised attention, forward and every gradient") {
  std::mt19937 rng(2023);
  const int D = 8, tileSize = 4;
  const double scale = 1.0 / std::sqrt(double(D)), eps = 1e-5;
  int skipped = 0;
  for (const auto& variant : kVariants)
    for (int T : {1, 7, 11})
      for (double p : {0.0, 0.3}) {
        LinearBiasSpec spec = makeLinearBiasSpec(variant.method, 2, variant.causal);
        const uint64_t seed = 0x1234567890abcdefull + uint64_t(T);
        for (int64_t h = 0; h < 2; ++h) {
          Head x = randomHead(rng, T, D);
          HeadBias hb = headBiasOf(spec, h);
          TiledResult r = tiledAttention(x, hb, uint32_t(h), float(scale), float(p), seed, tileSize);
          skipped += r.skippedTiles;
          const double ftb = firstTokenBiasOf(h);
          auto loss = [&](const Head& y, const LinearBiasSpec& s, double f) {
            return referenceLoss(y, s, h, f, scale, p, seed);
          };
          // Output: d loss / d g = o.
          std::vector<double> o(T * D), dq(T * D), dk(T * D), dv(T * D);
          auto differentiate = [&](std::vector<double> Head::*member, std::vector<double>& out) {
            for (int n = 0; n < T * D; ++n) {
              Head up = x, down = x;
              (up.*member)[n] += eps, (down.*member)[n] -= eps;
              out[n] = (loss(up, spec, ftb) - loss(down, spec, ftb)) / (2 * eps);
            }
          };
          differentiate(&Head::g, o);
          differentiate(&Head::q, dq);
          differentiate(&Head::k, dk);
          differentiate(&Head::v, dv);
          auto slopeDerivative = [&](bool past) {
            LinearBiasSpec up = spec, down = spec;
            (past ? up.slopePast : up.slopeFuture)[h] += eps;
            (past ? down.slopePast : down.slopeFuture)[h] -= eps;
            return (loss(x, up, ftb) - loss(x, down, ftb)) / (2 * eps);
          };
          double dPast = slopeDerivative(true), dFuture = slopeDerivative(false);
          double dFirst = (loss(x, spec, ftb + eps) - loss(x, spec, ftb - eps)) / (2 * eps);

          INFO(variant.name << " head " << h << " T " << T << " dropout " << p);
          INFO("largest relative differences: o " << relativeError(r.o, o) << ", dq " << relativeError(r.dq, dq)
                                                  << ", dk " << relativeError(r.dk, dk) << ", dv "
                                                  << relativeError(r.dv, dv));
          CHECK(relativeError(r.o, o) < 1e-4);
          CHECK(relativeError(r.dq, dq) < 1e-4);
          CHECK(relativeError(r.dk, dk) < 1e-4);
          CHECK(relativeError(r.dv, dv) < 1e-4);
          const tile::BiasGrads<double>& g = r.biasGrads;
          INFO("bias gradients (tiled / finite differences): past "
               << g.past << " / " << dPast << ", future " << g.future << " / " << dFuture << ", first token " << g.first
               << " / " << dFirst);
          CHECK(g.past == Approx(dPast).epsilon(1e-4).margin(1e-4));
          CHECK(g.future == Approx(dFuture).epsilon(1e-4).margin(1e-4));
          CHECK(g.first == Approx(dFirst).epsilon(1e-4).margin(1e-4));
        }
      }
  CHECK(skipped > 0);  // causal and one-sided heads skipped whole tiles
}

TEST_CASE(
    "the row correction, and the sums centred on the row weights, give the bias gradients of the exact softmax row "
    "term") {
  // One row i = 5 of a BiAlibi-like head over T = 9 keys (first-token, past, diagonal and future
  // cells): P a softmax, dP arbitrary, D' = sum_j P_ij dP_ij + delta (the rounded dO . O the kernel
  // uses). The gradients from dS' = P (dP - D') plus addRowCorrection must equal those from the
  // exact dS = P (dP - sum_j P_ij dP_ij).
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> uniform(-1.0, 1.0);
  HeadBias hb;
  hb.slopePast = 0.3f, hb.slopeFuture = 0.7f, hb.futureShift = 0.5f;
  hb.hasFirstTokenBias = true, hb.firstTokenBias = 1.5f;
  const int T = 9, i = 5;
  std::vector<double> prob(T), dP(T);
  double total = 0, exactRowDot = 0;
  for (int j = 0; j < T; ++j) total += prob[j] = std::exp(uniform(rng));
  for (int j = 0; j < T; ++j) {
    prob[j] /= total, dP[j] = uniform(rng);
    exactRowDot += prob[j] * dP[j];
  }
  const double usedRowDot = exactRowDot + 0.01;
  tile::BiasGrads<double> exact, used;
  tile::RowTerm<double> row;
  for (int j = 0; j < T; ++j) {
    const tile::BiasCell cell = tile::biasCell(hb, i, j);
    exact.add(cell, float(prob[j] * (dP[j] - exactRowDot)));
    used.add(cell, float(prob[j] * (dP[j] - usedRowDot)));
    row.add(cell, float(prob[j]), float(dP[j]));
  }
  tile::addRowCorrection(used, row, float(usedRowDot));
  // Every term occurs, and the correction removes the 0.01 shift down to float rounding.
  CHECK(exact.past != 0);
  CHECK(exact.future != 0);
  CHECK(exact.first != 0);
  CHECK(used.past == Approx(exact.past).margin(1e-6));
  CHECK(used.future == Approx(exact.future).margin(1e-6));
  CHECK(used.first == Approx(exact.first).margin(1e-6));
  // CentredBiasGrads: the same from each cell's P dP and the row's weights W alone, no row sum of dP.
  tile::BiasGrads<float> rowWeight;
  rowWeight.past = float(row.weight.past), rowWeight.future = float(row.weight.future);
  rowWeight.first = float(row.weight.first);
  tile::CentredBiasGrads<double> centred;
  for (int j = 0; j < T; ++j) centred.add(tile::biasCell(hb, i, j), float(prob[j] * dP[j]), rowWeight);
  CHECK(centred.past == Approx(exact.past).margin(1e-6));
  CHECK(centred.future == Approx(exact.future).margin(1e-6));
  CHECK(centred.first == Approx(exact.first).margin(1e-6));
}

TEST_CASE("dropout groups: every key in one group, and dropoutKeepGroup is dropoutKeep of its 4 keys") {
  // Group 4 m + u holds keys 16 m + 2 u + {0, 1, 8, 9} as words 0..3 (written out, not derived).
  std::vector<int> seen(64, 0);
  for (int m = 0; m < 4; ++m)
    for (int u = 0; u < 4; ++u) {
      const int keys[4] = {16 * m + 2 * u, 16 * m + 2 * u + 1, 16 * m + 2 * u + 8, 16 * m + 2 * u + 9};
      for (int w = 0; w < 4; ++w) {
        CHECK(tile::dropoutGroup(keys[w]) == 4 * m + u);
        CHECK(tile::dropoutWord(keys[w]) == w);
        ++seen[size_t(keys[w])];
      }
    }
  CHECK(std::count(seen.begin(), seen.end(), 1) == 64);
  for (uint32_t threshold : {0u, tile::dropoutThreshold(0.1), tile::dropoutThreshold(0.5)})
    for (int i : {0, 5, 4098})
      for (int j0 : {0, 16, 4080}) {
        for (int u = 0; u < 4; ++u) {
          const int group = tile::dropoutGroup(j0) + u;
          const uint32_t bits = tile::dropoutKeepGroup(0x5eedULL, 7, i, group, threshold);
          for (int j : {j0 + 2 * u, j0 + 2 * u + 1, j0 + 2 * u + 8, j0 + 2 * u + 9}) {
            INFO("threshold " << threshold << " i " << i << " key " << j);
            CHECK(((bits >> tile::dropoutWord(j)) & 1u) == uint32_t(tile::dropoutKeep(0x5eedULL, 7, i, j, threshold)));
          }
        }
      }
}
