// xtrap: train short, test long. A thin front end over the xtrap library.
#include <csignal>
#include <cstdio>
#include <string>

#include "cli/commands.h"
#include "util/interrupt.h"
#include "util/omp_wait_policy.h"

int main(int argc, char** argv) {
  xtrap::reexecWithPassiveOmpWait(argv);
  CLI::App app{"xtrap: length-extrapolation workbench (train short, test long)"};
  app.require_subcommand(1);
  app.set_version_flag("--version", XTRAP_VERSION);
  std::vector<std::pair<CLI::App*, xtrap::CommandAction>> commands;
  auto* train = app.add_subcommand("train", "train a decoder (causal LM) or encoder (masked LM)");
  commands.emplace_back(train, xtrap::addTrainCommand(*train));
  auto* eval = app.add_subcommand("eval", "perplexity of trained runs at growing Lvalid");
  commands.emplace_back(eval, xtrap::addEvalCommand(*eval));
  auto* probe = app.add_subcommand("probe", "look inside a run: bias matrices, attention maps and statistics");
  commands.emplace_back(probe, xtrap::addProbeCommand(*probe));
  auto* run = app.add_subcommand("run", "run a scenario file: train what is missing, evaluate, write results/NAME/");
  commands.emplace_back(run, xtrap::addRunCommand(*run));
  auto* plot = app.add_subcommand("plot", "draw perplexity vs Lvalid from results files (gnuplot)");
  commands.emplace_back(plot, xtrap::addPlotCommand(*plot));
  auto* exp = app.add_subcommand("export", "write a run as model.safetensors + config.json + vocab.txt for Python");
  commands.emplace_back(exp, xtrap::addExportCommand(*exp));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  // Over a file-size limit (ulimit -f) write() must fail with EFBIG, which the writers report and
  // clean up after, instead of the default SIGXFSZ killing the process mid-file.
  std::signal(SIGXFSZ, SIG_IGN);
  xtrap::installInterruptHandlers();
  try {
    for (auto& [sub, action] : commands)
      if (sub->parsed()) action();
  } catch (const xtrap::Interrupted& e) {
    std::fprintf(stderr, "xtrap: %s\n", e.what());
    return e.exitCode();
  } catch (const std::exception& e) {
    std::string what = e.what();
    std::fprintf(stderr, "xtrap: error: %s\n", what.substr(0, what.find('\n')).c_str());
    return 1;
  }
  return 0;
}
