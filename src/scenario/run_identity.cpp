#include "scenario/run_identity.h"

#include <fmt/format.h>

#include <stdexcept>

#include "run/checkpoint_file.h"

namespace xtrap {
namespace fs = std::filesystem;

namespace {
std::string directoryName(const std::string& dir) {
  fs::path p = fs::path(dir).lexically_normal();
  if (p.filename().empty()) p = p.parent_path();
  return p.filename().string();
}
}  // namespace

nlohmann::json runIdentity(const ModelConfig& m, const TrainConfig& t) {
  if (t.device == "auto") throw std::logic_error("runIdentity: resolve the device (auto) first");
  nlohmann::json j = {{"model", m}, {"train", t}};
  j["model"].erase("vocab_size");
  j["train"].erase("threads");
  // A key added to the configurations is left out at its default, which is what runs made before it
  // had: their identity, so their directory, stays the same.
  if (t.device == "cpu") j["train"].erase("device");
  if (t.dtype == "float32") j["train"].erase("dtype");
  if (t.taskMix.empty()) j["train"].erase("task_mix"), j["train"].erase("task_filler");
  if (t.accumulate == 1) j["train"].erase("accumulate");
  if (m.attentionDropoutRate() == m.dropout) j["model"].erase("attention_dropout");
  if (m.activationDropoutRate() == m.dropout) j["model"].erase("activation_dropout");
  if (m.activation == "gelu") j["model"].erase("activation");
  if (m.finalNorm) j["model"].erase("final_norm");
  if (m.adaptiveSoftmaxDropout == 0.0) j["model"].erase("adaptive_softmax_dropout");
  if (!m.adaptiveInput) j["model"].erase("adaptive_input");
  for (const char* pretrainedOnly : {"embedding_norm", "linear_biases", "norm_eps", "alibi_slopes", "alibi_bias_max"})
    if (j["model"][pretrainedOnly] == nlohmann::json(ModelConfig{})[pretrainedOnly]) j["model"].erase(pretrainedOnly);
  j["train"]["data"] = directoryName(t.dataDir);
  if (j["train"].contains("init")) j["train"]["init"].erase("run");  // the source's checkpoint digest names it
  return j;
}

nlohmann::json pretrainedIdentity(const ScenarioVariant& v) {
  if (v.train.device == "auto") throw std::logic_error("pretrainedIdentity: resolve the device (auto) first");
  nlohmann::json j = {{"pretrained", {{"model_type", v.pretrainedType}, {"weights", v.weightsDigest}}},
                      {"data", directoryName(v.train.dataDir)}};
  if (v.train.device != "cpu") j["device"] = v.train.device;
  if (v.train.dtype != "float32") j["dtype"] = v.train.dtype;
  if (v.trainLength > 0) j["train_length"] = v.trainLength;
  return j;
}

fs::path variantRunDir(const fs::path& runsRoot, const ScenarioVariant& v) {
  if (v.pretrained()) {
    uint64_t h = fnv1a64(pretrainedIdentity(v).dump()) & 0xffffffffffffull;
    return runsRoot / fmt::format("pretrained-{}-{}-{:012x}", v.pretrainedType, directoryName(v.pretrainedDir), h);
  }
  uint64_t h = fnv1a64(runIdentity(v.model, v.train).dump()) & 0xffffffffffffull;
  return runsRoot / fmt::format("{}-{}-L{}-{:012x}", v.model.arch, v.model.pos, v.model.contextLength, h);
}

}  // namespace xtrap
