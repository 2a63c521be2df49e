#pragma once
// Which runs are the same run: scenario run directories are content-addressed by this identity
// (runs/scenarios/<arch>-<pos>-L<L>-<hash>), so a finished run is reused by every scenario that
// trains the same model, and an existing run keeps its directory when xtrap gains a setting.
// Torch-free, so the hash of an existing run is pinned by a unit test.
#include <filesystem>
#include <nlohmann/json.hpp>

#include "scenario/scenario.h"

namespace xtrap {

// Everything in run.json's configs except what the data fixes (vocabulary size), what cannot
// change the result (threads), and where the data lives (only its directory name counts, so a
// checkout elsewhere reuses the runs). The device and precision count only where they differ
// from what every run had before they existed (cpu, float32): existing runs keep their hash, a
// CUDA or bfloat16 run is another run. `t.device` must be resolved (cpu | cuda, as run.json
// records it), not auto, which would name a different run on a machine with a GPU.
nlohmann::json runIdentity(const ModelConfig& m, const TrainConfig& t);

// A pretrained variant's identity: the model (model_type, weights digest: not its path, so a
// moved copy is the same model) and what its evaluations depend on besides each eval block's own
// settings: the data directory's name, and the device and precision where not cpu and float32.
nlohmann::json pretrainedIdentity(const ScenarioVariant& variant);

// The run directory a variant (its device resolved) trains into, under runsRoot. A pretrained
// variant trains nothing: its directory, pretrained-<model_type>-<model directory's name>-<hash
// of pretrainedIdentity>, holds only its evaluation cache.
std::filesystem::path variantRunDir(const std::filesystem::path& runsRoot, const ScenarioVariant& variant);

}  // namespace xtrap
