#pragma once
// Where a scenario's variants live: run directories are content-addressed by the run identity
// (run/config_identity.h; runs/scenarios/<arch>-<pos>-L<L>-<hash>), so a finished run is reused by
// every scenario that trains the same model, and an existing run keeps its directory when xtrap
// gains a setting. Torch-free.
#include <filesystem>
#include <nlohmann/json.hpp>

#include "run/config_identity.h"
#include "scenario/scenario.h"

namespace xtrap {

// A pretrained variant's identity: the model (model_type, weights digest: not its path, so a
// moved copy is the same model) and what its evaluations depend on besides each eval block's own
// settings: the data directory's name, and the device and precision where not cpu and float32.
nlohmann::json pretrainedIdentity(const ScenarioVariant& variant);

// The run directory a variant (its device resolved) trains into, under runsRoot. A pretrained
// variant trains nothing: its directory, pretrained-<model_type>-<model directory's name>-<hash
// of pretrainedIdentity>, holds only its evaluation cache.
std::filesystem::path variantRunDir(const std::filesystem::path& runsRoot, const ScenarioVariant& variant);

}  // namespace xtrap
