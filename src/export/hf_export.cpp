#include "export/hf_export.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "export/export_directory.h"
#include "run/checkpoint.h"
#include "run/pretrained_config.h"
#include "run/pretrained_family.h"
#include "run/pretrained_weights.h"
#include "util/atomic_file.h"
#include "util/interrupt.h"

namespace xtrap {
namespace {

// What no exported model type computes, with the training flag that avoids it; empty: none.
std::string commonRefusal(const ModelConfig& m) {
  if (!m.causal())
    return "an encoder (masked LM) has no transformers causal-LM model type (`xtrap export RUN OUT` writes it with a "
           "Python reference)";
  if (!m.adaptiveSoftmaxCutoffs.empty())
    return "the adaptive softmax (--adaptive-softmax, the default lm head) has no transformers model type: train "
           "with --adaptive-softmax none";
  if (m.adaptiveInput)
    return "adaptive input embeddings have no transformers model type: train without --adaptive-input";
  if (m.headKind() != OutputHeadKind::Lm)
    return "the " + m.head + " head has no transformers model type: train with --head lm";
  ModelConfig parts = m;
  parts.ropeScaling = RopeScaling();  // an adapted rotary run's scaling is written as rope_scaling
  if (parts.hasPretrainedParts() || m.embeddingNorm)
    return "the model has block parts (" + parts.pretrainedPartsSummary() + ") that no exported model type describes";
  return "";
}

// The family whose exporter takes `m`; a one-line error with every family's reason otherwise.
const PretrainedFamily& exportFamily(const ModelConfig& m) {
  std::string reasons;
  for (const PretrainedFamily* f : pretrainedFamilies()) {
    if (!f->exporter.config) continue;
    std::string why = f->exporter.refusal(m);
    if (why.empty()) return *f;
    reasons += (reasons.empty() ? "" : "; ") + why;
  }
  throw std::invalid_argument("export --hf: no model type computes this run exactly: " + reasons);
}

std::string checkpointName(const FamilyExporter& e, const std::string& name) {
  for (const auto& u : e.unprefixed)
    if (u == name) return name;
  return e.prefix + name;
}

nlohmann::json tokenizerJson(const std::vector<std::string>& words, int32_t eosId, int32_t unkId) {
  nlohmann::json vocab = nlohmann::json::object();
  for (size_t id = 0; id < words.size(); ++id) vocab[words[id]] = id;
  auto special = [&](int32_t id) {
    return nlohmann::json{{"id", id},        {"content", words[size_t(id)]}, {"single_word", false}, {"lstrip", false},
                          {"rstrip", false}, {"normalized", false},          {"special", true}};
  };
  return {{"version", "1.0"},
          {"truncation", nullptr},
          {"padding", nullptr},
          {"added_tokens", {special(unkId), special(eosId)}},
          // WikiText's convention, as xtrap's word-level data reads it (data/wikitext.h): one
          // <eos> per line end, the words between whitespace.
          {"normalizer", {{"type", "Replace"}, {"pattern", {{"String", "\n"}}}, {"content", " <eos> "}}},
          {"pre_tokenizer", {{"type", "WhitespaceSplit"}}},
          {"post_processor", nullptr},
          {"decoder", nullptr},
          {"model", {{"type", "WordLevel"}, {"vocab", vocab}, {"unk_token", words[size_t(unkId)]}}}};
}

// The settings the loader reads back from the written config must be the exported model's.
void checkReadBack(const nlohmann::json& config, const std::set<std::string>& tensors, const ModelConfig& m) {
  ModelConfig r = parsePretrainedConfig(config, "the exported config.json", tensors).model;
  bool same = r.vocabSize == m.vocabSize && r.dModel == m.dModel && r.layers == m.layers && r.heads == m.heads &&
              r.ffn == m.ffn && r.activation == m.activation && r.pos == m.pos && r.normEps == m.normEps &&
              r.tiedHead == m.tiedHead && r.scaleEmbedding == m.scaleEmbedding && r.finalNorm == m.finalNorm &&
              r.linearBiases == m.linearBiases && r.resolvedKvHeads() == m.resolvedKvHeads();
  if (m.position() == PositionMethod::Rotary)
    same = same && r.rotaryBase == m.rotaryBase && r.rotaryDim() == m.rotaryDim() && r.ropeScaling == m.ropeScaling;
  if (!same)
    throw std::logic_error("export --hf: the written config.json reads back as another model: " +
                           nlohmann::json(r).dump());
}

}  // namespace

void exportHuggingFace(const std::filesystem::path& runDir, const std::filesystem::path& outDir) {
  requireExportTarget(outDir);
  RunInfo run = readRunInfo(runDir);
  std::vector<std::string> words = runWords(run, runDir);
  const ModelConfig& m = run.model;
  if (std::string why = commonRefusal(m); !why.empty()) throw std::invalid_argument("export --hf: " + why);
  ModelConfig exported = m;  // the folds: an input embedding carrying the scale, so an untied head
  exported.scaleEmbedding = false;
  exported.tiedHead = false;
  const PretrainedFamily& family = exportFamily(exported);
  const auto eos = std::find(words.begin(), words.end(), std::string(Vocabulary::kEos));
  const auto unk = std::find(words.begin(), words.end(), std::string(Vocabulary::kUnk));
  if (eos == words.end() || unk == words.end())
    throw std::runtime_error("export --hf: the run's vocabulary has no <eos> or no <unk>");
  const auto eosId = int32_t(eos - words.begin()), unkId = int32_t(unk - words.begin());

  throwIfInterrupted();
  Transformer model = loadTrainedModel(run);
  throwIfInterrupted();
  torch::NoGradGuard noGrad;
  std::map<std::string, torch::Tensor> ours;  // xtrap parameter name -> value, after the folds
  for (const auto& item : model->named_parameters(true)) ours[item.key()] = item.value();
  torch::Tensor embedding = ours.at("token_embedding.weight");  // (V, C)
  if (m.tiedHead) ours["head.weight"] = embedding;
  // The product the model computes at every lookup, once: the same float32 rounding.
  if (m.scaleEmbedding) ours["token_embedding.weight"] = embedding * std::sqrt(double(m.dModel));

  std::vector<std::pair<std::string, torch::Tensor>> tensors;
  std::set<std::string> names;
  for (const auto& [name, source] : family.tensors(exported)) {
    auto it = ours.find(name);
    if (it == ours.end()) throw std::logic_error("export --hf: the model has no parameter " + name);
    torch::Tensor stored = storedLayout(it->second, source.layout, exported.heads);
    ours.erase(it);
    if (source.names.size() != 1)
      throw std::logic_error("export --hf: " + name + " maps to " + std::to_string(source.names.size()) + " tensors");
    tensors.emplace_back(checkpointName(family.exporter, source.names[0]), stored.contiguous());
    names.insert(tensors.back().first);
  }
  if (!ours.empty())
    throw std::invalid_argument("export --hf: parameter " + ours.begin()->first + " has no place in model type " +
                                family.modelTypes.front());
  nlohmann::json config = family.exporter.config(exported, eosId);
  checkReadBack(config, names, exported);

  writeDirectoryAtomically(outDir, [&](const std::filesystem::path& tmp) {
    writeTensorFile(tmp / "model.safetensors", tensors);
    writeTextAtomically(tmp / "config.json", config.dump(2) + "\n");
    writeTextAtomically(tmp / "tokenizer.json", tokenizerJson(words, eosId, unkId).dump(2) + "\n");
    nlohmann::json tokenizerConfig{{"tokenizer_class", "PreTrainedTokenizerFast"},
                                   {"bos_token", std::string(Vocabulary::kEos)},
                                   {"eos_token", std::string(Vocabulary::kEos)},
                                   {"unk_token", std::string(Vocabulary::kUnk)},
                                   {"model_max_length", m.contextLength}};
    writeTextAtomically(tmp / "tokenizer_config.json", tokenizerConfig.dump(2) + "\n");
  });
}

}  // namespace xtrap
