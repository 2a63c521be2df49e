#include <fmt/format.h>

#include "cli/commands.h"
#include "dist/dist_env.h"
#include "scenario/run_scenario.h"
#include "scenario/verify_results.h"
#include "util/execution_context.h"

namespace xtrap {

CommandAction addRunCommand(CLI::App& cmd) {
  auto file = std::make_shared<std::string>();
  auto options = std::make_shared<ScenarioRunOptions>();
  auto runs = std::make_shared<std::string>(options->runsRoot.string());
  auto results = std::make_shared<std::string>(options->resultsRoot.string());
  auto noProgress = std::make_shared<bool>(false);
  auto device = std::make_shared<std::string>();
  auto dtype = std::make_shared<std::string>();
  cmd.add_option("scenario", *file, "scenario file (TOML), e.g. scenarios/smoke.toml")->required();
  cmd.add_flag("--dry-run", options->dryRun, "list what would be trained and evaluated, with time estimates");
  cmd.add_option("--runs", *runs, "where run directories live (shared between scenarios)")->capture_default_str();
  cmd.add_option("--results", *results, "results go to RESULTS/<scenario name>/")->capture_default_str();
  cmd.add_option("--device", *device,
                 std::string(kDeviceNames) + " for every variant (default: the scenario's device key, else auto)");
  cmd.add_option("--dtype", *dtype,
                 std::string(kDtypeNames) + " for every variant (default: the scenario's dtype key, else float32)");
  cmd.add_flag("--no-progress", *noProgress, "no progress bars");
  auto verify = std::make_shared<bool>(false);
  cmd.add_flag("--verify", *verify,
               "check, without training or evaluating, that RESULTS/<name>/ still follows from the file and this "
               "code (run directories, code version, rows); exit 1 listing what does not");

  return [=, &cmd] {
    rejectUnless(cmd, {"--dry-run", "--runs", "--device", "--dtype", "--no-progress"}, !*verify,
                 "does not apply with --verify (it reads the committed results only)");
    if (*verify) {
      Scenario scenario = loadScenario(*file);
      auto problems = verifyScenarioResults(scenario, *results);
      if (problems.size() == 1) throw std::runtime_error(problems.front());
      for (const auto& p : problems) std::fprintf(stderr, "%s\n", p.c_str());
      if (!problems.empty())
        throw std::runtime_error(
            fmt::format("{}: {} problem(s) in the committed results (listed above)", scenario.name, problems.size()));
      fmt::print("{}: results follow from the file and this code\n", scenario.name);
      return;
    }
    if (!device->empty()) checkDeviceName(*device);
    if (!dtype->empty()) checkDtypeName(*dtype);
    ScenarioRunOptions o = *options;
    o.runsRoot = *runs;
    o.resultsRoot = *results;
    o.progress = !*noProgress;
    Scenario scenario = loadScenario(*file);
    // Like the scenario's own keys: a bf16 or CUDA variant is another run (its own directory).
    for (ScenarioVariant& v : scenario.variants) {
      if (!device->empty()) v.train.device = *device;
      if (!dtype->empty()) v.train.dtype = *dtype;
    }
    auto outDir = runScenario(scenario, o);
    if (!o.dryRun && distEnvFromEnvironment().rank == 0) fmt::print("results: {}\n", outDir.string());
  };
}

}  // namespace xtrap
