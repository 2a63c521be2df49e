#pragma once
// `xtrap run FILE --verify`: do the committed results of a scenario still follow from its file and
// today's code? Nothing is trained or evaluated; results/NAME/ is read and checked:
//  - manifest.json is not marked incomplete and states the xtrap version (git commit) that wrote it, and
//    version.txt is there;
//  - results/NAME/scenario.toml is the scenario file as it is now;
//  - every variant (each seed of a `seeds` list) is in the manifest, and the run directory the
//    manifest names is the one today's run identity computes (scenario/run_identity.h), on the
//    device the manifest records (a pretrained variant's: the weights digest the manifest records
//    is that of the model directory the file names, as it is now); the manifest names no variant
//    the file does not have;
//  - every row of results.csv belongs to a variant of the file and to an Lvalid of an eval block
//    that selects it.
// Torch-free, so ctest runs it over every committed study in seconds.
#include <filesystem>
#include <string>
#include <vector>

#include "scenario/scenario.h"

namespace xtrap {

// The problems found, one line each ("" none): the caller prints them and fails.
std::vector<std::string> verifyScenarioResults(const Scenario& scenario, const std::filesystem::path& resultsRoot);

}  // namespace xtrap
