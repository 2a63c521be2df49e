#pragma once
// Each subcommand declares its options (with defaults shown in --help) into its own config
// struct and returns the action to run after parsing. The actions call the library.
#include <CLI/CLI.hpp>
#include <functional>

namespace xtrap {

using CommandAction = std::function<void()>;

CommandAction addTrainCommand(CLI::App& app);
CommandAction addEvalCommand(CLI::App& app);
CommandAction addProbeCommand(CLI::App& app);
CommandAction addRunCommand(CLI::App& app);
CommandAction addPlotCommand(CLI::App& app);
CommandAction addExportCommand(CLI::App& app);

// Where runs live unless --out / RUN says otherwise.
inline const char* kRunsRoot = "runs";

}  // namespace xtrap
