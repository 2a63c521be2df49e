#include "scenario/run_identity.h"

#include <fmt/format.h>

#include <stdexcept>

#include "run/checkpoint_file.h"

namespace xtrap {
namespace fs = std::filesystem;

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
  if (m.attentionDropoutRate() == m.dropout) j["model"].erase("attention_dropout");
  if (m.activationDropoutRate() == m.dropout) j["model"].erase("activation_dropout");
  if (m.activation == "gelu") j["model"].erase("activation");
  if (m.finalNorm) j["model"].erase("final_norm");
  if (m.adaptiveSoftmaxDropout == 0.0) j["model"].erase("adaptive_softmax_dropout");
  if (!m.adaptiveInput) j["model"].erase("adaptive_input");
  for (const char* pretrainedOnly : {"embedding_norm", "linear_biases", "norm_eps", "alibi_slopes", "alibi_bias_max"})
    if (j["model"][pretrainedOnly] == nlohmann::json(ModelConfig{})[pretrainedOnly]) j["model"].erase(pretrainedOnly);
  fs::path data = fs::path(t.dataDir).lexically_normal();
  if (data.filename().empty()) data = data.parent_path();
  j["train"]["data"] = data.filename().string();
  return j;
}

fs::path variantRunDir(const fs::path& runsRoot, const ScenarioVariant& v) {
  uint64_t h = fnv1a64(runIdentity(v.model, v.train).dump()) & 0xffffffffffffull;
  return runsRoot / fmt::format("{}-{}-L{}-{:012x}", v.model.arch, v.model.pos, v.model.contextLength, h);
}

}  // namespace xtrap
