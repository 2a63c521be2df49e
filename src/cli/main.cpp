// xtrap: train short, test long. A thin front end over the xtrap library.
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <string>

#include "cli/commands.h"
#include "util/address_space.h"
#include "util/interrupt.h"
#include "util/omp_wait_policy.h"

// Runs before any library's initialiser, OpenBLAS's included, which would otherwise hang under a
// too small ulimit -v (util/address_space.h).
extern "C" void xtrapCheckAddressSpace(int, char**, char** envp) {
  std::string shortfall = xtrap::addressSpaceShortfall(xtrap::startupBlasThreads(envp));
  if (shortfall.empty()) return;
  std::fprintf(stderr, "xtrap: error: %s\n", shortfall.c_str());
  _exit(1);
}
__attribute__((section(".preinit_array"),
               used)) static void (*const kCheckAddressSpace)(int, char**, char**) = xtrapCheckAddressSpace;

int main(int argc, char** argv) {
  xtrap::reexecWithPassiveOmpWait(argv);
  CLI::App app{"xtrap: length-extrapolation workbench (train short, test long)"};
  app.require_subcommand(1);
  app.set_version_flag("--version", XTRAP_VERSION);
  struct Command {
    const char* name;
    const char* description;
    xtrap::CommandAction (*add)(CLI::App&);
  };
  const Command kCommands[] = {
      {"train", "train a decoder (causal LM) or encoder (masked LM)", xtrap::addTrainCommand},
      {"eval", "perplexity of trained runs at growing Lvalid", xtrap::addEvalCommand},
      {"probe", "look inside a run: bias matrices, attention maps and statistics", xtrap::addProbeCommand},
      {"run", "run a scenario file: train what is missing, evaluate, write results/NAME/", xtrap::addRunCommand},
      {"plot", "draw perplexity vs Lvalid from results files (gnuplot)", xtrap::addPlotCommand},
      {"export",
       "write a run for Python (model.safetensors + config.json + vocab.txt) or in Hugging Face layout (--hf)",
       xtrap::addExportCommand},
      {"data", "load a WikiText directory (building its token cache) and print its sizes", xtrap::addDataCommand},
  };
  std::vector<std::pair<CLI::App*, xtrap::CommandAction>> commands;
  for (const auto& command : kCommands) {
    auto* sub = app.add_subcommand(command.name, command.description);
    commands.emplace_back(sub, command.add(*sub));
  }
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
    if (*e.what() != '\0') std::fprintf(stderr, "xtrap: %s\n", e.what());  // empty: a rank said it
    return e.exitCode();
  } catch (const std::exception& e) {
    std::string what = e.what();
    std::fprintf(stderr, "xtrap: error: %s\n", what.substr(0, what.find('\n')).c_str());
    return 1;
  }
  return 0;
}
