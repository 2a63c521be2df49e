#pragma once
// A Hugging Face config.json's rotary settings, read as transformers' standardization
// (RotaryEmbeddingConfigMixin in modeling_rope_utils.py, main) reads them, resolved into
// RopeScaling (model/position/rope_scaling.h) and validated before anything is allocated:
//  - the dict: `rope_scaling` (4.x) when non-empty, else `rope_parameters` (5.x); its type from
//    `rope_type`, else the older `type` ("su", Phi-3's old name, reads as longrope), else default.
//  - rope_theta: the dict's, else the top-level key, else options.defaultTheta.
//  - partial_rotary_factor: the top-level key, else the dict's, else 1.
//  - yarn, longrope, llama3: M = the top-level original_max_position_embeddings (Phi-3 keeps it
//    there; transformers gives it priority), else the dict's, else max_position_embeddings.
//    dynamic: M = max_position_embeddings (transformers ignores an original length there).
//  - yarn's factor when absent or null, and longrope's: max_position_embeddings / M.
//  - Per-layer dicts (5.x Gemma 3: {"full_attention": {...}, "sliding_attention": {...}}): the
//    full-attention one is the model's; the sliding one must be unscaled and gives localBase.
//    4.x Gemma 3's `rope_local_base_freq` gives localBase too.
// Keys that change the rotation in ways xtrap does not compute (mrope_section, short_mscale,
// long_mscale) are refused; other unknown keys are ignored, as transformers only warns.
// Torch-free. The pretrained loader calls it once per config, before building the model.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "model/position/rope_scaling.h"

namespace xtrap {

struct RopeConfig {
  double base = 10000.0;        // rope_theta
  double rotaryFraction = 1.0;  // partial_rotary_factor
  RopeScaling scaling;          // the (global) layers' scaling, validated for the rotated channels
  double localBase = 0.0;       // the sliding-window layers' own unscaled base; 0 = none given
};

struct RopeConfigOptions {
  double defaultTheta = 10000.0;   // rope_theta when the config has none (the family config's default)
  bool yarnMeansLongrope = false;  // Phi3Config reads rope type "yarn" (and "su") as longrope
};

// Reads `config` (the parsed config.json; `file` names it in errors) for heads of headDim channels.
// Throws std::runtime_error, one line "FILE: KEY ...", for an unknown rope type (naming the valid
// ones), an ill-typed or missing key, or a value RopeScaling::validate refuses.
RopeConfig readRopeConfig(const nlohmann::json& config, const std::string& file, int64_t headDim,
                          const RopeConfigOptions& options = {});

// The inverse for the scaling: a `rope_scaling` dict that readRopeConfig reads back as `s` (every
// field written; `type` beside `rope_type` for transformers before 4.42). A dynamic scaling reads
// its M from max_position_embeddings, which the caller writes as s.originalMaxPositions.
nlohmann::json ropeScalingJson(const RopeScaling& s);

}  // namespace xtrap
