#pragma once
// A pretrained rotary model's own frequency scaling (Hugging Face's `rope_scaling`, computed as
// transformers' modeling_rope_utils.py computes it), resolved by the loader into one struct:
// every field filled, nothing left to a default the formulas would have to look up. Torch-free.
// d = the rotated dimensions of a head (head_dim * partial_rotary_factor), inv_i = base^(-2i/d).
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace xtrap {

struct RopeScaling {
  // default | linear | dynamic | yarn | longrope | llama3
  std::string type = "default";
  double factor = 1.0;
  // The length the model was pretrained at (yarn, longrope, llama3: original_max_position_embeddings;
  // dynamic: max_position_embeddings, past which the frequencies are recomputed).
  int64_t originalMaxPositions = 0;
  // yarn
  double betaFast = 32.0, betaSlow = 1.0;
  double mscale = 0.0, mscaleAllDim = 0.0;  // 0 = not given
  double attentionFactor = 0.0;             // yarn, longrope: given explicitly; 0 = from the formula
  bool truncate = true;                     // yarn: floor / ceil the ramp's bounds
  // longrope: d/2 factors each, the long ones for sequences past originalMaxPositions
  std::vector<double> shortFactor, longFactor;
  // llama3
  double lowFreqFactor = 1.0, highFreqFactor = 4.0;

  static const std::vector<std::string>& typeNames();
  bool isDefault() const { return type == "default"; }
};

void to_json(nlohmann::json& j, const RopeScaling& s);
void from_json(const nlohmann::json& j, RopeScaling& s);

}  // namespace xtrap
