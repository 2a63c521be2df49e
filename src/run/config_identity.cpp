#include "run/config_identity.h"

#include <fmt/format.h>

#include <filesystem>
#include <stdexcept>

#include "util/fnv1a64.h"

namespace xtrap {
namespace fs = std::filesystem;

std::string directoryName(const std::string& dir) {
  fs::path p = fs::path(dir).lexically_normal();
  if (p.filename().empty()) p = p.parent_path();
  return p.filename().string();
}

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
  if (j["train"].contains("init")) {
    j["train"]["init"].erase("run");                // where the source lies
    j["train"]["init"].erase("checkpoint_digest");  // its bytes, which differ from machine to machine
  }
  return j;
}

std::string identityHash(const nlohmann::json& identity) {
  return fmt::format("{:012x}", fnv1a64(identity.dump()) & 0xffffffffffffull);
}

std::string runIdentityHash(const ModelConfig& m, const TrainConfig& t) { return identityHash(runIdentity(m, t)); }

}  // namespace xtrap
