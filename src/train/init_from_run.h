#pragma once
// train --init (run/adapt_config.h, docs/adapt.md): the source run an adapted run starts from,
// and its weights copied in. The optimizer starts fresh: the source's AdamW moments belong to
// another length and, in the papers' recipes, another learning rate.
#include <cstdint>
#include <filesystem>
#include <string>

#include "model/transformer.h"
#include "run/adapt_config.h"
#include "run/run_directory.h"

namespace xtrap {

// The source run of --init: a finished or stopped xtrap run with a checkpoint (not a pretrained
// directory yet: its tokenizer is not WikiText's word vocabulary). Throws a one-line error.
RunInfo readInitSource(const std::filesystem::path& dir);

// Fails, one line, unless `source` is the run `t` names: its identity (run/config_identity.h) and
// the step it had reached (a source trained further, or replaced, is another starting point).
void checkInitSource(const RunInfo& source, const TrainConfig& t);

// A digest of the source's checkpoint bytes, recorded in run.json (train.init.checkpoint_digest):
// which bytes the adapted run started from. Not part of the run's identity, which names the source
// by its configuration, so that a scenario can name its adapted runs before their sources exist.
std::string checkpointDigest(const RunInfo& source);

// Copies every parameter and buffer of `source` into `model` (same names and shapes), except the
// fixed ALiBi slopes, which are the adapted model's own (interpolated) ones.
void copySourceWeights(Transformer& model, Transformer& source);

}  // namespace xtrap
