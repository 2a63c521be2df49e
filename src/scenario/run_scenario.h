#pragma once
// `xtrap run FILE`: train every variant that is not trained yet, evaluate, probe, and write
// results/<name>/ (results.csv, table.md, ppl_vs_length.png, scenario.toml, version.txt,
// manifest.json).
//
// Run directories are content-addressed: runs/scenarios/<arch>-<pos>-L<L>-<hash of the model and
// training configuration>. A finished run with a matching run.json is reused (also by other
// scenarios that train the same model), an unfinished one resumes from its checkpoint, so killing
// `xtrap run` and starting it again loses at most checkpoint_every steps. Evaluation results are
// cached per run directory (scenario-evals/<hash>.json) for the same reason.
#include <filesystem>

#include "scenario/scenario.h"

namespace xtrap {

struct ScenarioRunOptions {
  std::filesystem::path runsRoot = "runs/scenarios";
  std::filesystem::path resultsRoot = "results";
  bool dryRun = false;   // only print what would be trained and evaluated, with time estimates
  bool progress = true;  // progress bars
};

// Returns the results directory (nothing is written on a dry run).
std::filesystem::path runScenario(const Scenario& scenario, const ScenarioRunOptions& options);

// The run directory a variant trains into (under runsRoot).
std::filesystem::path variantRunDir(const std::filesystem::path& runsRoot, const ScenarioVariant& variant);

}  // namespace xtrap
