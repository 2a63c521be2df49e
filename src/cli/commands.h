#pragma once
// Each subcommand declares its options (with defaults shown in --help) into its own config
// struct and returns the action to run after parsing. The actions call the library.
#include <CLI/CLI.hpp>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "model/context_extension.h"

namespace xtrap {

using CommandAction = std::function<void()>;

CommandAction addTrainCommand(CLI::App& app);
CommandAction addEvalCommand(CLI::App& app);
CommandAction addProbeCommand(CLI::App& app);
CommandAction addRunCommand(CLI::App& app);
CommandAction addPlotCommand(CLI::App& app);
CommandAction addExportCommand(CLI::App& app);
CommandAction addDataCommand(CLI::App& app);

// An option that does not apply is rejected, never silently ignored: throws "OPTION WHY" when
// any of `options` was given on the command line of `cmd` and `applies` is false.
inline void rejectUnless(const CLI::App& cmd, const std::vector<std::string>& options, bool applies,
                         const std::string& why) {
  if (applies) return;
  for (const auto& name : options)
    if (cmd.get_option(name)->count() > 0) throw std::invalid_argument(name + " " + why);
}

// --extend-sinks, --extend-window, --extend-group, --extend-leak and --extend-limit (eval, probe):
// the context extension's settings, 0 = each method's default (model/context_extension.h).
void addExtensionSettingOptions(CLI::App& cmd, ExtensionSettings& settings);
inline const std::vector<std::string> kExtensionSettingOptions = {"--extend-sinks", "--extend-window", "--extend-group",
                                                                  "--extend-leak", "--extend-limit"};

// Where runs live unless --out / RUN says otherwise.
inline const char* kRunsRoot = "runs";

}  // namespace xtrap
