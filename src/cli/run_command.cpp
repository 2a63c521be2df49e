#include <fmt/format.h>

#include "cli/commands.h"
#include "dist/dist_env.h"
#include "scenario/run_scenario.h"

namespace xtrap {

CommandAction addRunCommand(CLI::App& cmd) {
  auto file = std::make_shared<std::string>();
  auto options = std::make_shared<ScenarioRunOptions>();
  auto runs = std::make_shared<std::string>(options->runsRoot.string());
  auto results = std::make_shared<std::string>(options->resultsRoot.string());
  auto noProgress = std::make_shared<bool>(false);
  cmd.add_option("scenario", *file, "scenario file (TOML), e.g. scenarios/smoke.toml")->required();
  cmd.add_flag("--dry-run", options->dryRun, "list what would be trained and evaluated, with time estimates");
  cmd.add_option("--runs", *runs, "where run directories live (shared between scenarios)")->capture_default_str();
  cmd.add_option("--results", *results, "results go to RESULTS/<scenario name>/")->capture_default_str();
  cmd.add_flag("--no-progress", *noProgress, "no progress bars");

  return [=] {
    ScenarioRunOptions o = *options;
    o.runsRoot = *runs;
    o.resultsRoot = *results;
    o.progress = !*noProgress;
    auto outDir = runScenario(loadScenario(*file), o);
    if (!o.dryRun && distEnvFromEnvironment().rank == 0) fmt::print("results: {}\n", outDir.string());
  };
}

}  // namespace xtrap
