#pragma once
// Extend, then adapt (train --init, docs/adapt.md): the settings of a run that starts from another
// run's weights at a new training length L with an interpolation's position transform baked into
// its configuration, so that the adapted run's own positions are the interpolated ones wherever
// it is built (its training, `eval` without flags, probes, export). What each interpolation
// becomes:
//   rotary        linear -> rope_scaling {linear, a} (position interpolation, Chen et al. 2023)
//                 ntk    -> the base --interp ntk computes, base a^(d / (d - 2)) (NTK-aware)
//                 yarn   -> rope_scaling {yarn, a, original length = the source's L}, with YaRN's
//                           attention factor 0.1 ln a + 1 (Peng et al. 2023)
//   ALiBi family  linear, ntk -> the fixed slopes divided as --interp divides them (alibi_interp)
//   any method    none   -> only L changes
// Torch-free: the CLI and scenario files (scenario.h: `init`) both build adapted runs from it;
// train/init_from_run.h copies the weights.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "model/interpolation.h"
#include "model/model_config.h"
#include "run/train_config.h"

namespace xtrap {

// The source's model at training length L with `interp` at factor a baked in. Throws
// std::invalid_argument, one line, where that has no meaning: a dynamic interpolation (a per
// window, not one model), learned slopes, a method without positions to interpolate, a rotary
// model with rope scaling of its own, learned positions whose table is shorter than L.
ModelConfig adaptedModelConfig(const ModelConfig& source, int64_t L, Interp interp, double a);

// The factor a when none is given: the new L over the source's, at least 1.
double defaultAdaptScale(int64_t L, int64_t sourceL);

// The papers' fine-tuning settings (--recipe): pi (Chen et al. 2023: lr 2e-5, 20 warmup steps,
// constant) and yarn (Peng et al. 2023: the same with AdamW betas (0.9, 0.95) and no weight decay).
// Sets lr, warmup, schedule, weight_decay and adam_betas where `given(key)` is false; a name not in
// adaptRecipeNames() is a one-line std::invalid_argument.
const std::vector<std::string>& adaptRecipeNames();
void applyAdaptRecipe(const std::string& recipe, TrainConfig& t, const std::function<bool(const std::string&)>& given);

}  // namespace xtrap
