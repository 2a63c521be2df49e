#include "export/hf_export.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "export/export_directory.h"
#include "run/checkpoint.h"
#include "run/pretrained_config.h"
#include "run/pretrained_family.h"
#include "run/pretrained_weights.h"
#include "run/rope_config.h"
#include "run/tokenizer_files.h"
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

// A run trained from a pretrained directory (train --init DIR) as that directory's model type: its
// config.json (kept as source_config.json) with the run's length and position transform, the
// parameters under the source's own tensor names (source_tensors.json), its tokenizer files.
void exportAsSourceFamily(const RunInfo& run, const std::filesystem::path& outDir) {
  const ModelConfig& m = run.model;
  const PretrainedFamily* family = findPretrainedFamily(run.tokenizerFamily);
  if (!family) throw std::runtime_error("export --hf: " + run.dir.string() + ": unknown family " + run.tokenizerFamily);
  if (m.alibiInterp != "none")
    throw std::invalid_argument("export --hf: the run's ALiBi slopes are interpolated (" + m.alibiInterp +
                                "), which model type " + run.tokenizerFamily +
                                " does not compute: adapt with --interp none");
  nlohmann::json config = nlohmann::json::parse(readTextFile(run.dir / "source_config.json"));
  const auto sourceNames =
      nlohmann::json::parse(readTextFile(run.dir / "source_tensors.json")).get<std::set<std::string>>();
  const ModelConfig source = parsePretrainedConfig(config, "source_config.json", sourceNames).model;
  Transformer model = loadTrainedModel(run);
  throwIfInterrupted();
  torch::NoGradGuard noGrad;
  std::map<std::string, torch::Tensor> ours;  // xtrap parameter name -> value
  for (const auto& item : model->named_parameters(true)) ours[item.key()] = item.value();
  // A name as the source stored it: as it is, or under one of the family's prefixes.
  auto storedName = [&](const std::string& name) {
    if (sourceNames.count(name)) return name;
    for (const auto& prefix : family->tensorPrefixes)
      if (sourceNames.count(prefix + name)) return prefix + name;
    throw std::runtime_error("export --hf: the source had no tensor " + name + " (source_tensors.json)");
  };
  std::vector<std::pair<std::string, torch::Tensor>> tensors;
  std::set<std::string> names;
  for (const auto& [name, from] : family->tensors(m)) {
    auto it = ours.find(name);
    if (it == ours.end()) throw std::logic_error("export --hf: the model has no parameter " + name);
    torch::Tensor stored = storedLayout(it->second, from.layout, m.heads);
    ours.erase(it);
    int64_t row = 0;  // several names: consecutive row ranges (q, k, v; gate, up)
    for (size_t k = 0; k < from.names.size(); ++k) {
      int64_t rows = from.names.size() == 1 ? stored.size(0) : from.rows[k];
      tensors.emplace_back(storedName(from.names[k]), stored.narrow(0, row, rows).contiguous());
      names.insert(tensors.back().first);
      row += rows;
    }
  }
  if (!ours.empty())
    throw std::logic_error("export --hf: parameter " + ours.begin()->first + " has no place in model type " +
                           run.tokenizerFamily);
  // The settings train --init changes (run/adapt_config.h), under the keys the source's config has.
  auto readBack = [&](const nlohmann::json& c) {
    return parsePretrainedConfig(c, "the exported config.json", names).model;
  };
  const std::vector<std::string> lengthKeys = {"max_position_embeddings", "seq_length", "max_seq_len", "n_positions"};
  for (const auto& key : lengthKeys)
    if (config.contains(key)) config[key] = m.contextLength;
  // A length the source's config left at its family's default: the key the family reads it from.
  for (const auto& key : lengthKeys) {
    if (readBack(config).contextLength == m.contextLength) break;
    nlohmann::json tried = config;
    tried[key] = m.contextLength;
    try {
      if (readBack(tried).contextLength == m.contextLength) config = tried;
    } catch (const std::runtime_error&) {  // a key the family does not read
    }
  }
  if (!(m.ropeScaling == source.ropeScaling)) config["rope_scaling"] = ropeScalingJson(m.ropeScaling);
  if (m.rotaryBase != source.rotaryBase) {
    bool written = false;
    for (const char* key : {"rope_theta", "rotary_emb_base"})
      if (config.contains(key)) config[key] = m.rotaryBase, written = true;
    if (!written) config["rope_theta"] = m.rotaryBase;
  }
  config["torch_dtype"] = "float32";
  // The written config must read back as the run's model, every setting.
  nlohmann::json readBackJson = readBack(config);
  nlohmann::json expected = m;
  for (auto& [key, value] : expected.items())
    if (readBackJson.value(key, nlohmann::json()) != value)
      throw std::invalid_argument("export --hf: model type " + run.tokenizerFamily + "'s config.json cannot say " +
                                  key + " = " + value.dump() + " (it reads back as " +
                                  readBackJson.value(key, nlohmann::json()).dump() + ")");

  writeDirectoryAtomically(outDir, [&](const std::filesystem::path& tmp) {
    writeTensorFile(tmp / "model.safetensors", tensors);
    writeTextAtomically(tmp / "config.json", config.dump(2) + "\n");
    copyTokenizerFiles(run.dir, tmp);
  });
}

// Some transformers versions take YaRN's factor as max_position_embeddings over rope_scaling's
// original_max_position_embeddings, not its `factor` (their _compute_yarn_parameters, "DeepSeek-V3
// ... use the ratio"); the two agree only at a = L / the source's L.
void warnIfYarnFactorIsNotTheLengthRatio(const ModelConfig& m) {
  const RopeScaling& s = m.ropeScaling;
  if (s.type == "yarn" && s.factor * double(s.originalMaxPositions) != double(m.contextLength))
    std::fprintf(
        stderr,
        "xtrap: warning: export --hf: YaRN factor %g is not L / original length (%lld / %lld); some transformers "
        "versions use that ratio instead of rope_scaling's factor\n",
        s.factor, static_cast<long long>(m.contextLength), static_cast<long long>(s.originalMaxPositions));
}

}  // namespace

void exportHuggingFace(const std::filesystem::path& runDir, const std::filesystem::path& outDir) {
  requireExportTarget(outDir);
  RunInfo run = readRunInfo(runDir);
  warnIfYarnFactorIsNotTheLengthRatio(run.model);
  if (!run.tokenizerFamily.empty()) return exportAsSourceFamily(run, outDir);
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
