#pragma once
// Which runs are the same run, from their configurations alone: scenario run directories are
// content-addressed by this identity (scenario/run_identity.h), and a run adapted from another
// (train --init) names its source by it. Torch-free, so the hash of an existing run is pinned by a
// unit test.
#include <nlohmann/json.hpp>
#include <string>

#include "model/model_config.h"
#include "run/train_config.h"

namespace xtrap {

// Everything in run.json's configs except what the data fixes (vocabulary size), what cannot
// change the result (threads), and where the data lives (only its directory name counts, so a
// checkout elsewhere reuses the runs). The device and precision count only where they differ
// from what every run had before they existed (cpu, float32): existing runs keep their hash, a
// CUDA or bfloat16 run is another run. `t.device` must be resolved (cpu | cuda, as run.json
// records it), not auto, which would name a different run on a machine with a GPU. An adapted
// run's source counts by its identity and step, not by where it lies or its checkpoint's bytes.
nlohmann::json runIdentity(const ModelConfig& m, const TrainConfig& t);

// The last component of a directory path, with or without a trailing '/' (the data directory's
// name, which is what counts of it).
std::string directoryName(const std::string& dir);

// An identity as 12 hex digits (48 bits of its FNV-1a hash): the tail of a scenario run's
// directory name (runIdentityHash), or of a pretrained variant's evaluation cache.
std::string identityHash(const nlohmann::json& identity);
std::string runIdentityHash(const ModelConfig& m, const TrainConfig& t);

}  // namespace xtrap
