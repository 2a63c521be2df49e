#pragma once
// Training-free context extension beyond scaling (docs/position-methods.md, "Context extension"):
// which keys a query sees and how far they seem, for a decoder evaluated past its training length
// L_train. Each method is a visibility rule and, for the pairs outside its near region, a second
// ("far") pair of positions, from which the position method computes the far pair's bias or
// rotation instead of the true ones:
//  - sinks (StreamingLLM, Xiao et al. 2024; mit-han-lab/streaming-llm's StartRecentKVCache with
//    pos_shift): query i sees the first S keys and its last W keys before it (i - j <= W), as the
//    authors' cache of S + W entries does when token i arrives. Positions are re-assigned within
//    the cache, for rotary keys (pos_shift) and for ALiBi's distances alike (their MPT path builds
//    the bias over the cache): a sink j is at distance min(i, S + W) - j, the recent keys keep i - j.
//  - lambda (LM-Infinite, Han et al. 2024; Glaciohound/LM-Infinite): the first n_global keys and
//    the last L_local (i - j < L_local); a key at distance >= the limit is seen at distance exactly
//    the limit (the authors' stationary query, rotated by the limit, against unrotated keys).
//  - self-extend (Jin et al. 2024; datamllab/LongLM): every key; pairs with i - j >= W take grouped
//    positions floor(i / G) + W - W / G against floor(j / G) (the authors' real division W / G).
//  - rerope and leaky-rerope (Su 2023; bojone/rerope): pairs with i - j >= w are at distance w;
//    leaky: at w + (i - j - w) / k (the authors' query at (i + w (k - 1)) / k, key at j / k).
//  - logn (Chiang & Cholak 2022; bojone/rerope's patches apply it with ReRoPE): query i is
//    multiplied by max(1, ln(i + 1) / ln(L_train)). It combines with any of the above ("+ logn").
// Encoders (the papers define decoders; this is their mirror image): self-extend, rerope,
// leaky-rerope and logn apply, a future pair (j > i) taking the past rule at distance j - i, and
// logn's n the window length (every query sees every key, as in Chiang & Cholak's encoders);
// sinks and lambda, defined by a cache of past tokens, do not.
// Positions are 0-based token indices of the evaluated window. Torch-free: the closed forms are
// unit-tested on cases worked out by hand, and the attention (attention.h) reads them.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "model/position_method.h"

namespace xtrap {

enum class ExtensionMethod { None, Sinks, Lambda, SelfExtend, ReRope, LeakyReRope };

// The settings of the methods; 0 = the default derived from L_train (resolveContextExtension).
struct ExtensionSettings {
  int64_t sinkTokens = 0;     // sinks: S (4); lambda: n_global (10)
  int64_t window = 0;         // sinks: W (L_train - S); lambda: L_local (L_train); self-extend: W
                              // (L_train / 4); rerope and leaky-rerope: w (L_train / 8)
  int64_t group = 0;          // self-extend: G (8)
  double leak = 0;            // leaky-rerope: k (16)
  int64_t distanceLimit = 0;  // lambda: the limit (L_local)
};

struct ContextExtension {
  ExtensionMethod method = ExtensionMethod::None;
  bool logn = false;
  int64_t trainLength = 0;  // L_train
  int64_t sinkTokens = 0, window = 0, group = 0, distanceLimit = 0;
  double leak = 0;

  bool active() const { return method != ExtensionMethod::None || logn; }
  // Query i sees key j (j <= i).
  bool visible(int64_t i, int64_t j) const;
  // The pair (i, j) takes the far positions.
  bool far(int64_t i, int64_t j) const;
  // The far positions of query i and key j; their difference is the far pair's distance.
  double farQueryPosition(int64_t i) const;
  double farKeyPosition(int64_t j) const;
  bool hasFarPositions() const { return method != ExtensionMethod::None; }
  // The closed forms as thresholds: a pair is far when i - j >= nearDistance(); a key that is not
  // one of the first sinkTokens is hidden when i - j >= recentDistance() (0: none is).
  int64_t nearDistance() const;
  int64_t recentDistance() const;
  // logn's factor of query i (1 without logn).
  double queryScale(int64_t i) const;
  // The visible keys of queries [q0, q1), as sorted disjoint half-open intervals: the key blocks
  // no query of the block sees are never computed.
  std::vector<std::pair<int64_t, int64_t>> keyRanges(int64_t q0, int64_t q1) const;
  // What a result row records: "sinks S=4 W=124", "self-extend G=8 W=32 + logn", "none".
  std::string label() const;
};

// "none", "sinks", "lambda", "self-extend", "rerope", "leaky-rerope", "logn", or one of the
// first six + "+logn" (e.g. "rerope+logn"), with the settings resolved against L_train. Throws
// std::invalid_argument, one line, for an unknown name or a setting out of range.
ContextExtension resolveContextExtension(const std::string& name, const ExtensionSettings& settings,
                                         int64_t trainLength);
// Throws std::invalid_argument, one line naming both, where the extension has no meaning for a
// model of position method `pos`: sinks and lambda in encoders, sliding-window attention layers,
// and far positions for a method that cannot take them (the relative ones can: rotary, the ALiBi
// family, T5, KERPLE-log, FIRE; none takes sinks and lambda, whose far pairs differ only in
// position; absolute embeddings take logn only). docs/position-methods.md has the table.
void checkExtensionApplies(const ContextExtension& extension, PositionMethod pos, bool causal, bool slidingWindow);

// Throws std::invalid_argument, one line, for a setting given (non-zero) that none of the named
// methods uses (e.g. --extend-group without self-extend): an accepted option changes the result.
void checkExtensionSettingsUsed(const std::vector<std::string>& names, const ExtensionSettings& settings);
const std::vector<std::string>& extensionMethodNames();  // the six methods and logn

}  // namespace xtrap
