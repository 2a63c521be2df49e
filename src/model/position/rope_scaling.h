#pragma once
// A pretrained rotary model's own frequency scaling (Hugging Face's `rope_scaling`, 5.x's
// `rope_parameters`), computed as transformers' modeling_rope_utils.py (main, 5.x) computes it,
// resolved by the reader (run/rope_config.h) into one struct: every field filled, nothing left to
// a default the formulas would have to look up. Torch-free.
// d = the rotated channels of a head (int(head_dim * partial_rotary_factor)), i = 0..d/2-1 a pair,
// inv_i = base^(-2i/d) its inverse frequency, L = the positions of the window (offset + T).
//  default   inv_i
//  linear    inv_i / factor
//  dynamic   with L' = max(L, M) (M = originalMaxPositions, max_position_embeddings):
//            inv_i of base' = base * (factor L' / M - (factor - 1))^(d / (d - 2)); base' = base
//            for L <= M (frequencies reset below M)
//  yarn      r_i = clamp((i - lo) / (hi - lo), 0, 1) (hi + 0.001 when hi == lo), with
//            lo = max(floor(c(beta_fast)), 0), hi = min(ceil(c(beta_slow)), d - 1),
//            c(b) = d ln(M / (2 pi b)) / (2 ln base), M = original_max_position_embeddings (no
//            floor / ceil when truncate is false); inv_i <- r_i inv_i / factor + (1 - r_i) inv_i
//  longrope  inv_i / e_i, e = long_factor when L > M (the whole window), else short_factor
//  llama3    wavelength w_i = 2 pi / inv_i: w_i > M / low_freq_factor -> inv_i / factor;
//            w_i < M / high_freq_factor -> inv_i; between, s = (M / w_i - low) / (high - low):
//            (1 - s) inv_i / factor + s inv_i
// Attention factor (cos and sin are multiplied by it, so the logits by its square): yarn's
// attention_factor, else mscale(factor, mscale) / mscale(factor, mscale_all_dim) when both are
// given, else mscale(factor, 1), mscale(s, m) = 1 for s <= 1, else 0.1 m ln(s) + 1; longrope's
// attention_factor, else 1 for factor <= 1, else sqrt(1 + ln(factor) / ln(M)); 1 for the rest.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace xtrap {

struct RopeScaling {
  // default | linear | dynamic | yarn | longrope | llama3
  std::string type = "default";
  // linear, dynamic, yarn, llama3: the context extension; longrope: only sets the attention
  // factor (given, else max_position_embeddings / original_max_position_embeddings).
  double factor = 1.0;
  // M above: the length the model was pretrained at (yarn, longrope, llama3:
  // original_max_position_embeddings; dynamic: max_position_embeddings, past which the
  // frequencies are recomputed).
  int64_t originalMaxPositions = 0;
  // yarn
  double betaFast = 32.0, betaSlow = 1.0;
  double mscale = 0.0, mscaleAllDim = 0.0;  // 0 = not given
  double attentionFactor = 0.0;             // yarn, longrope: given explicitly; 0 = from the formula
  bool truncate = true;                     // yarn: floor / ceil the ramp's bounds
  // longrope: d/2 factors each, the long ones for windows past originalMaxPositions
  std::vector<double> shortFactor, longFactor;
  // llama3
  double lowFreqFactor = 1.0, highFreqFactor = 4.0;

  static const std::vector<std::string>& typeNames();
  bool isDefault() const { return type == "default"; }
  // Whether the frequencies depend on the window's length (dynamic, longrope).
  bool dependsOnLength() const { return type == "dynamic" || type == "longrope"; }
  // Throws std::invalid_argument, one line, for an unknown type (naming the valid ones) or a value
  // the formulas above cannot take for d rotated channels (a factor < 1 where one scales the
  // frequencies, a missing original length, longrope lists not of d/2 positive numbers,
  // low_freq_factor >= high_freq_factor, beta_fast < beta_slow, ...).
  void validate(int64_t rotaryDim) const;
};

// The d/2 inverse frequencies of a window of seqLen positions (only dynamic and longrope look at
// it), in float64 (transformers computes them in float32).
std::vector<double> ropeInverseFrequencies(const RopeScaling& s, double base, int64_t rotaryDim, int64_t seqLen);

// The factor cos and sin are multiplied by (1 but for yarn and longrope).
double ropeAttentionFactor(const RopeScaling& s);

bool operator==(const RopeScaling& a, const RopeScaling& b);

void to_json(nlohmann::json& j, const RopeScaling& s);
void from_json(const nlohmann::json& j, RopeScaling& s);

}  // namespace xtrap
