#include "cli/commands.h"
#include "export/export_run.h"
#include "export/hf_export.h"
#include "util/runtime.h"

namespace xtrap {

CommandAction addExportCommand(CLI::App& cmd) {
  auto run = std::make_shared<std::string>();
  auto out = std::make_shared<std::string>();
  auto hf = std::make_shared<std::string>();
  cmd.add_option("RUN", *run, "run directory (run.json + checkpoint.pt)")->required();
  auto* outOption = cmd.add_option("OUT", *out, "new directory for model.safetensors, config.json, vocab.txt");
  auto* hfOption = cmd.add_option("--hf", *hf,
                                  "new directory in Hugging Face layout instead (config.json, model.safetensors, "
                                  "tokenizer.json): gpt_neox for rotary decoders, mpt for ALiBi ones (docs/export.md)");
  outOption->excludes(hfOption);
  return [=] {
    if (out->empty() && hf->empty()) throw std::invalid_argument("export: give OUT or --hf DIR");
    configureRuntime(1);
    if (!hf->empty())
      exportHuggingFace(*run, *hf);
    else
      exportRun(*run, *out);
    std::printf("exported %s to %s\n", run->c_str(), (hf->empty() ? out : hf)->c_str());
  };
}

}  // namespace xtrap
