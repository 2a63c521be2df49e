#include "cli/commands.h"
#include "export/export_run.h"
#include "util/runtime.h"

namespace xtrap {

CommandAction addExportCommand(CLI::App& cmd) {
  auto run = std::make_shared<std::string>();
  auto out = std::make_shared<std::string>();
  cmd.add_option("RUN", *run, "run directory (run.json + checkpoint.pt)")->required();
  cmd.add_option("OUT", *out, "new directory for model.safetensors, config.json, vocab.txt")->required();
  return [=] {
    configureRuntime(1);
    exportRun(*run, *out);
    std::printf("exported %s to %s\n", run->c_str(), out->c_str());
  };
}

}  // namespace xtrap
