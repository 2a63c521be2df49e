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

#include "scenario/run_identity.h"
#include "scenario/scenario.h"

namespace xtrap {

struct ScenarioRunOptions {
  std::filesystem::path runsRoot = "runs/scenarios";
  std::filesystem::path resultsRoot = "results";
  bool dryRun = false;   // only print what would be trained and evaluated, with time estimates
  bool progress = true;  // progress bars
};

// Returns the results directory (nothing is written on a dry run). Each variant trains, is
// evaluated and probed on its device and in its precision (the `device` and `dtype` keys).
std::filesystem::path runScenario(const Scenario& scenario, const ScenarioRunOptions& options);

}  // namespace xtrap
