#pragma once
// Extend, then adapt (train --init, docs/adapt.md): a run that starts from another run's weights at
// a new training length L with an interpolation's position transform baked into its configuration,
// so that the adapted run's own positions are the interpolated ones wherever it is built (its
// training, `eval` without flags, probes, export). What each interpolation becomes:
//   rotary        linear -> rope_scaling {linear, a} (position interpolation, Chen et al. 2023)
//                 ntk    -> the base --interp ntk computes, base a^(d / (d - 2)) (NTK-aware)
//                 yarn   -> rope_scaling {yarn, a, original length = the source's L}, with YaRN's
//                           attention factor 0.1 ln a + 1 (Peng et al. 2023)
//   ALiBi family  linear, ntk -> the fixed slopes divided as --interp divides them (alibiInterp)
//   any method    none   -> only L changes
// The optimizer starts fresh: the source's AdamW moments belong to another length and, in the
// papers' recipes, another learning rate.
#include <cstdint>
#include <filesystem>
#include <string>

#include "model/interpolation.h"
#include "model/transformer.h"
#include "run/run_directory.h"

namespace xtrap {

// The source's model at training length L with `interp` at factor a baked in. Throws
// std::invalid_argument, one line, where that has no meaning: a dynamic interpolation (a per
// window, not one model), learned slopes, a method without positions to interpolate, a rotary
// model with rope scaling of its own, learned positions whose table is shorter than L.
ModelConfig adaptedModelConfig(const ModelConfig& source, int64_t L, Interp interp, double a);

// The source run of --init: a finished or stopped xtrap run with a checkpoint (not a pretrained
// directory yet: its tokenizer is not WikiText's word vocabulary). Throws a one-line error.
RunInfo readInitSource(const std::filesystem::path& dir);

// A digest of the source's checkpoint bytes: the adapted run's identity names what it started
// from, not where it lay.
std::string checkpointDigest(const RunInfo& source);

// Copies every parameter and buffer of `source` into `model` (same names and shapes), except the
// fixed ALiBi slopes, which are the adapted model's own (interpolated) ones.
void copySourceWeights(Transformer& model, Transformer& source);

}  // namespace xtrap
