#pragma once
// Every ALiBi variant as one per-head linear bias spec. For query i, key j and head h:
//   j < i : -slopePast[h]   * (i - j)                  (-inf if blockPast[h])
//   j > i : -slopeFuture[h] * (j - i - futureShift)    (-inf if blockFuture[h])
//   j = i : 0
// except that, when hasFirstTokenBias (bialibi), every pair with i == 0 or j == 0 (the global
// first token: <bos> when the encoder prepends one) gets firstTokenBias[h] INSTEAD of the above,
// (0, 0) included: LittleBird's BiALiBi gives attention to and from its global [CLS] token a
// learned per-head bias in place of the distance term.
// Learned variants use these numbers as the initial values of their parameters.
// Interpolation (linear / NTK) is a transform of the slopes; see slope_interpolation.h.
#include <cstdint>
#include <vector>

#include "model/position_method.h"

namespace xtrap {

struct LinearBiasSpec {
  std::vector<double> slopePast;    // (H)
  std::vector<double> slopeFuture;  // (H)
  std::vector<bool> blockPast;      // (H)
  std::vector<bool> blockFuture;    // (H)
  double futureShift = 0.0;         // 0.5 for alibi-offset; must be in [0, 1)
  bool learnedSlopes = false;       // slopes are trainable (sigmoid-parameterised)
  bool hasFirstTokenBias = false;   // learned per-head bias on pairs touching position 0

  int64_t heads() const { return static_cast<int64_t>(slopePast.size()); }
  // The bias for one (head, query, key), straight from the formula above (tests, dumps).
  double bias(int64_t h, int64_t i, int64_t j, double firstTokenBias = 0.0) const;
};

// Press et al.'s slopes: geometric with start = ratio = 2^(-8/H); for H not a power of 2 the
// 2^floor(log2 H) slopes, then every other slope of the 2*2^floor(log2 H) set.
std::vector<double> standardAlibiSlopes(int64_t heads);

// MPT's slopes (llm-foundry's gen_slopes): n' = the smallest power of two >= H, slope k of n' is
// 2^(-k * biasMax / n'), k = 1..n'; for H < n' the odd-numbered ones first, then the even ones,
// cut to H. Equal to Press's for a power of two and biasMax 8.
std::vector<double> mptAlibiSlopes(int64_t heads, double biasMax);

// The spec of an ALiBi-family method for `heads` heads; `causal` for decoders (only `alibi`
// is allowed there). Throws std::invalid_argument with a one-line reason otherwise.
LinearBiasSpec makeLinearBiasSpec(PositionMethod method, int64_t heads, bool causal);

}  // namespace xtrap
