#include "run/pretrained_family.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <set>

#include "run/families/families.h"

namespace xtrap {

const std::vector<const PretrainedFamily*>& pretrainedFamilies() {
  static const std::vector<const PretrainedFamily*> all{
      &bloomFamily(), &mptFamily(), &gptNeoxFamily(), &llamaFamily(), &mistralFamily(), &qwen2Family(), &qwen3Family(),
      &phi3Family(), &gemmaFamily(), &gemma2Family(), &gemma3Family(),
      // Under model_type bert the first family that recognises a checkpoint reads it.
      &mosaicBertFamily(), &jinaBertFamily(), &bertFamily(), &robertaFamily()};
  return all;
}

PretrainedConfig pretrainedDecoder(const std::string& modelType, const std::string& pos) {
  PretrainedConfig p;
  p.modelType = modelType;
  ModelConfig& m = p.model;
  m.arch = "decoder";
  m.pos = pos;
  m.head = "lm";
  m.dropout = 0.0;
  m.attentionDropout = 0.0;
  m.activationDropout = 0.0;
  m.scaleEmbedding = false;
  m.finalNorm = true;
  return p;
}

const PretrainedFamily* findPretrainedFamily(const std::string& name) {
  for (const auto* f : pretrainedFamilies()) {
    if (!f->name.empty() ? f->name == name
                         : std::find(f->modelTypes.begin(), f->modelTypes.end(), name) != f->modelTypes.end())
      return f;
  }
  return nullptr;
}

const PretrainedFamily* recognisePretrainedFamily(const std::string& modelType, const nlohmann::json& config,
                                                  const TensorNames& tensors) {
  for (const auto* f : pretrainedFamilies())
    for (const auto& t : f->modelTypes)
      if (t == modelType && (!f->recognises || f->recognises(config, tensors))) return f;
  return nullptr;
}

bool isUnreadTensor(const PretrainedFamily& family, const std::string& name) {
  for (const auto& u : family.unreadTensors)
    if (u.back() == '.' ? name.rfind(u, 0) == 0 : name == u) return true;
  return false;
}

const std::vector<std::string>& commonInertKeys() {
  static const std::vector<std::string> keys{"model_type", "architectures", "_name_or_path", "transformers_version",
                                             "torch_dtype", "dtype", "use_cache", "initializer_range", "pad_token_id",
                                             "attention_dropout", "tokenizer_class", "auto_map", "output_attentions",
                                             "output_hidden_states", "return_dict", "is_decoder", "is_encoder_decoder",
                                             "id2label", "label2id", "task_specific_params", "problem_type",
                                             // Token ids never change the logits; the families that take their context
                                             // token from them also list them as computed.
                                             "bos_token_id", "eos_token_id"};
  return keys;
}

const std::vector<RefusedKey>& commonRefusedKeys() {
  static const std::vector<RefusedKey> keys{{"quantization_config", nullptr, "quantized weights"}};
  return keys;
}

ConfigReader familyReader(const PretrainedFamily& family, const nlohmann::json& config, const std::string& file) {
  return ConfigReader(config, file, std::set<std::string>(family.computed.begin(), family.computed.end()));
}

std::string pretrainedKeysMarkdown() {
  auto codeList = [](const std::vector<std::string>& keys) {
    std::vector<std::string> quoted;
    for (const auto& k : keys) quoted.push_back("`" + k + "`");
    return quoted.empty() ? std::string("none") : fmt::format("{}", fmt::join(quoted, ", "));
  };
  auto refusedList = [](const std::vector<RefusedKey>& keys) {
    std::string out;
    for (const auto& k : keys) out += fmt::format("- `{}` unless {} ({})\n", k.key, k.accepted.dump(), k.why);
    return out.empty() ? std::string("- none\n") : out;
  };
  std::string md = "Every family also ignores " + codeList(commonInertKeys()) + ", and refuses:\n\n" +
                   refusedList(commonRefusedKeys());
  for (const auto* f : pretrainedFamilies()) {
    md += f->name.empty() ? fmt::format("\n### {}\n\n", fmt::join(f->modelTypes, ", "))
                          : fmt::format("\n### {} (model_type {})\n\n", f->name, fmt::join(f->modelTypes, ", "));
    md += "Computed: " + codeList(f->computed) + ".\n\n";
    md += "Known not to change the numbers: " + codeList(f->inert) + ".\n\n";
    md += "Refused:\n\n" + refusedList(f->refused);
    if (!f->unreadTensors.empty()) md += "\nTensors not read: " + codeList(f->unreadTensors) + ".\n";
  }
  return md;
}

}  // namespace xtrap
