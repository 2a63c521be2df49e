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

// The source of --init: a finished or stopped xtrap run with a checkpoint, or a pretrained
// decoder's Hugging Face directory (run/pretrained_config.h), whose tokenizer.json the adapted run
// then reads its data through (RunInfo::tokenizerFamily). Throws a one-line error.
RunInfo readInitSource(const std::filesystem::path& dir);

// What names the source in the adapted run's identity (TrainConfig::initSource): an xtrap run's
// identity (run/config_identity.h), a pretrained directory's pretrainedWeightsDigest (its
// config.json and its weight files' headers).
std::string initSourceIdentity(const RunInfo& source);

// Fails, one line, unless `source` is the run `t` names: its identity and the step it had reached
// (a source trained further, or replaced, is another starting point; a pretrained one is at 0).
void checkInitSource(const RunInfo& source, const TrainConfig& t);

// A digest of the source's weight bytes (a run's checkpoint.pt, a pretrained directory's weight
// files in order), recorded in run.json (train.init.checkpoint_digest): which bytes the adapted run
// started from. Not part of the run's identity, which names the source by its configuration, so
// that a scenario can name its adapted runs before their sources exist.
std::string checkpointDigest(const RunInfo& source);

// A run from a pretrained directory keeps what it needs of the source's files in its own
// directory: tokenizer.json (its data's tokenizer), and tokenizer_config.json and
// special_tokens_map.json where present; config.json as source_config.json and the names of its
// weight files' tensors as source_tensors.json (what `export --hf` writes the run as).
void copyPretrainedSourceFiles(const RunInfo& source, const std::filesystem::path& runDir);

// Copies every parameter and buffer of `source` into `model` (same names and shapes), except the
// fixed ALiBi slopes, which are the adapted model's own (interpolated) ones.
void copySourceWeights(Transformer& model, Transformer& source);

}  // namespace xtrap
