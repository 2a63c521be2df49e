#include "train/init_from_run.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <stdexcept>
#include <vector>

#include "run/config_identity.h"
#include "run/pretrained_config.h"
#include "run/tokenizer_files.h"
#include "util/atomic_file.h"
#include "util/fnv1a64.h"
#include "util/mapped_file.h"

namespace xtrap {

RunInfo readInitSource(const std::filesystem::path& dir) {
  RunInfo run = readRunInfo(dir);
  if (!run.pretrained.empty()) {
    if (!run.model.causal())
      throw std::invalid_argument("--init " + dir.string() + ": a pretrained encoder (" + run.pretrained +
                                  "); --init from a Hugging Face directory takes decoders (causal LMs)");
    return run;
  }
  if (!std::filesystem::exists(checkpointPath(dir)))
    throw std::invalid_argument("--init " + dir.string() + ": no checkpoint.pt (the run has not saved a step)");
  return run;
}

std::string initSourceIdentity(const RunInfo& source) {
  return source.pretrained.empty() ? runIdentityHash(source.model, source.train) : pretrainedWeightsDigest(source.dir);
}

void checkInitSource(const RunInfo& source, const TrainConfig& t) {
  std::string identity = initSourceIdentity(source);
  if (identity != t.initSource || source.stepsDone != t.initStep)
    throw std::invalid_argument(fmt::format(
        "--init {}: the run there (identity {}, step {}) is not the source this run names (identity {}, step {})",
        t.initRun, identity, source.stepsDone, t.initSource, t.initStep));
}

std::string checkpointDigest(const RunInfo& source) {
  uint64_t h = kFnv1a64Basis;
  std::vector<std::filesystem::path> files = source.pretrained.empty()
                                                 ? std::vector<std::filesystem::path>{checkpointPath(source.dir)}
                                                 : pretrainedWeightFiles(source.dir);
  for (const auto& file : files) MappedFile(file).readFrom(0, [&h](std::string_view block) { h = fnv1a64(block, h); });
  return fmt::format("{:016x}", h);
}

void copyPretrainedSourceFiles(const RunInfo& source, const std::filesystem::path& runDir) {
  copyTokenizerFiles(source.dir, runDir);
  writeTextAtomically(runDir / "source_config.json", readTextFile(source.dir / "config.json"));
  writeTextAtomically(runDir / "source_tensors.json", nlohmann::json(pretrainedTensorNames(source.dir)).dump(1) + "\n");
}

void copySourceWeights(Transformer& model, Transformer& source) {
  torch::NoGradGuard noGrad;
  auto fixedSlope = [](const std::string& name) {
    return name == "linear_bias.slope_past" || name == "linear_bias.slope_future";
  };
  auto from = source->named_parameters(), fromBuffers = source->named_buffers();
  for (auto& p : model->named_parameters()) p.value().copy_(from[p.key()]);
  for (auto& b : model->named_buffers())
    if (!fixedSlope(b.key())) b.value().copy_(fromBuffers[b.key()]);
}

}  // namespace xtrap
