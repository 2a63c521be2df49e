#include "run/pretrained_config.h"

#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <stdexcept>

#include "util/fnv1a64.h"

namespace xtrap {
namespace fs = std::filesystem;

namespace {

nlohmann::json readJson(const fs::path& file) {
  std::ifstream in(file);
  if (!in) throw std::runtime_error("cannot read " + file.string());
  try {
    return nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception&) {
    throw std::runtime_error(file.string() + " is not valid JSON");
  }
}

// Reads typed keys of one JSON object, every error one line naming the file.
struct ConfigReader {
  const nlohmann::json& j;
  std::string file;

  [[noreturn]] void fail(const std::string& why) const { throw std::runtime_error(file + ": " + why); }
  const nlohmann::json* find(std::initializer_list<const char*> names) const {
    for (const char* n : names)
      if (j.contains(n) && !j[n].is_null()) return &j[n];
    return nullptr;
  }
  int64_t integer(std::initializer_list<const char*> names) const {
    const auto* v = find(names);
    if (!v) fail(std::string("needs ") + *names.begin());
    if (!v->is_number_integer() || v->get<int64_t>() < 1)
      fail(std::string(*names.begin()) + " must be a positive integer");
    return v->get<int64_t>();
  }
  double number(const char* name, double fallback) const {
    const auto* v = find({name});
    if (!v) return fallback;
    if (!v->is_number()) fail(std::string(name) + " must be a number");
    return v->get<double>();
  }
  bool flag(const char* name, bool fallback) const {
    const auto* v = find({name});
    if (!v) return fallback;
    if (!v->is_boolean()) fail(std::string(name) + " must be true or false");
    return v->get<bool>();
  }
  std::string text(const char* name, const std::string& fallback) const {
    const auto* v = find({name});
    if (!v) return fallback;
    if (!v->is_string()) fail(std::string(name) + " must be a string");
    return v->get<std::string>();
  }
};

ModelConfig commonSettings() {
  ModelConfig m;
  m.arch = "decoder";
  m.pos = "alibi";
  m.head = "lm";
  m.dropout = 0.0;
  m.attentionDropout = 0.0;
  m.activationDropout = 0.0;
  m.scaleEmbedding = false;
  m.finalNorm = true;
  return m;
}

PretrainedConfig bloom(const ConfigReader& r) {
  PretrainedConfig p;
  p.modelType = "bloom";
  ModelConfig& m = p.model = commonSettings();
  m.vocabSize = r.integer({"vocab_size"});
  m.dModel = r.integer({"hidden_size", "n_embed"});
  m.layers = r.integer({"n_layer", "num_hidden_layers"});
  m.heads = r.integer({"n_head", "num_attention_heads"});
  m.ffn = 4 * m.dModel;
  m.activation = "gelu-tanh";
  m.embeddingNorm = true;
  m.normEps = r.number("layer_norm_epsilon", 1e-5);
  // BLOOM was trained at 2048 tokens (the paper; config.json has seq_length on some models).
  m.contextLength = r.find({"seq_length"}) ? r.integer({"seq_length"}) : 2048;
  if (r.flag("apply_residual_connection_post_layernorm", false))
    r.fail("apply_residual_connection_post_layernorm true is not supported (xtrap's blocks add the block's input)");
  if (!r.flag("tie_word_embeddings", true))
    r.fail("tie_word_embeddings false is not supported (BLOOM ties its output)");
  p.contextToken = int32_t(r.find({"bos_token_id"}) ? r.integer({"bos_token_id"}) : 1);
  return p;
}

PretrainedConfig mpt(const ConfigReader& r) {
  PretrainedConfig p;
  p.modelType = "mpt";
  ModelConfig& m = p.model = commonSettings();
  m.vocabSize = r.integer({"vocab_size"});
  m.dModel = r.integer({"d_model", "hidden_size"});
  m.layers = r.integer({"n_layers", "num_hidden_layers"});
  m.heads = r.integer({"n_heads", "num_attention_heads"});
  m.ffn = int64_t(std::llround(r.number("expansion_ratio", 4.0) * double(m.dModel)));
  m.activation = "gelu";
  m.linearBiases = !r.flag("no_bias", true);
  m.normEps = r.number("layer_norm_epsilon", 1e-5);
  m.contextLength = r.integer({"max_seq_len"});  // the training length; not a limit (see the header)
  m.alibiSlopes = "mpt";
  if (r.find({"logit_scale"})) r.fail("logit_scale is not supported");
  std::string norm = r.text("norm_type", "low_precision_layernorm");
  if (norm != "layernorm" && norm != "low_precision_layernorm")
    r.fail("norm_type '" + norm + "' is not supported (layernorm, low_precision_layernorm)");
  if (const auto* ffn = r.find({"ffn_config"})) {
    ConfigReader f{*ffn, r.file};
    std::string type = ffn->is_object() ? f.text("ffn_type", "mptmlp") : "?";
    if (type != "mptmlp") r.fail("ffn_config.ffn_type '" + type + "' is not supported (mptmlp)");
    if (ffn->is_object() && f.find({"ffn_act_fn"})) r.fail("ffn_config.ffn_act_fn is not supported (exact GELU only)");
  }
  const auto* attn = r.find({"attn_config"});
  if (!attn || !attn->is_object()) r.fail("needs attn_config");
  ConfigReader a{*attn, r.file};
  if (!a.flag("alibi", false)) r.fail("attn_config.alibi false is not supported (xtrap reads ALiBi models)");
  if (a.flag("qk_ln", false)) r.fail("attn_config.qk_ln is not supported");
  if (a.flag("prefix_lm", false)) r.fail("attn_config.prefix_lm is not supported");
  std::string type = a.text("attn_type", "multihead_attention");
  if (type != "multihead_attention") r.fail("attn_config.attn_type '" + type + "' is not supported");
  if (const auto* s = a.find({"softmax_scale"})) {
    if (!s->is_number() || std::abs(s->get<double>() * std::sqrt(double(m.dModel / m.heads)) - 1.0) > 1e-12)
      r.fail("attn_config.softmax_scale other than 1/sqrt(head_dim) is not supported");
  }
  m.alibiBiasMax = a.number("alibi_bias_max", 8.0);
  if (const auto* c = a.find({"clip_qkv"})) {
    if (!c->is_number() || !(c->get<double>() > 0)) r.fail("attn_config.clip_qkv must be a positive number");
    m.clipQkv = c->get<double>();
  }
  p.contextToken = int32_t(r.find({"bos_token_id"})   ? r.integer({"bos_token_id"})
                           : r.find({"eos_token_id"}) ? r.integer({"eos_token_id"})
                                                      : 0);
  return p;
}

}  // namespace

bool isPretrainedDirectory(const fs::path& dir) {
  return fs::is_regular_file(dir / "config.json") && !fs::exists(dir / "run.json");
}

PretrainedConfig readPretrainedConfig(const fs::path& dir) {
  fs::path file = dir / "config.json";
  nlohmann::json j = readJson(file);
  ConfigReader r{j, file.string()};
  if (!j.is_object()) r.fail("not a JSON object");
  std::string type = r.text("model_type", "");
  PretrainedConfig p;
  if (type == "bloom")
    p = bloom(r);
  else if (type == "mpt")
    p = mpt(r);
  else
    r.fail("model_type '" + type + "' is not supported (supported: bloom, mpt)");
  try {
    p.model.validate();
  } catch (const std::invalid_argument& e) {
    r.fail(e.what());
  }
  return p;
}

std::string pretrainedWeightsDigest(const fs::path& dir) {
  auto readBytes = [](const fs::path& file, uint64_t limit) {
    std::ifstream in(file, std::ios::binary);
    if (!in) throw std::runtime_error("cannot read " + file.string());
    std::string bytes(limit, '\0');
    in.read(bytes.data(), std::streamsize(limit));
    bytes.resize(size_t(in.gcount()));
    return bytes;
  };
  fs::path config = dir / "config.json";
  uint64_t h = fnv1a64(readBytes(config, fs::file_size(config)));
  for (const auto& file : pretrainedWeightFiles(dir)) {
    if (!fs::exists(file)) throw std::runtime_error("missing weight file " + file.string());
    uint64_t size = fs::file_size(file);
    std::string length = readBytes(file, 8);
    uint64_t headerBytes = 0;
    for (int i = 7; i >= 0 && length.size() == 8; --i)
      headerBytes = (headerBytes << 8) | static_cast<unsigned char>(length[size_t(i)]);
    if (length.size() < 8 || headerBytes > size - 8)
      throw std::runtime_error("safetensors " + file.string() + ": the header length does not fit the file");
    std::string named = file.filename().string() + "\n" + std::to_string(size) + "\n";
    h = fnv1a64(named, h);
    h = fnv1a64(readBytes(file, 8 + headerBytes), h);
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  return std::string("fnv1a64:") + hex;
}

std::vector<fs::path> pretrainedWeightFiles(const fs::path& dir) {
  if (fs::exists(dir / "model.safetensors")) return {dir / "model.safetensors"};
  fs::path index = dir / "model.safetensors.index.json";
  if (!fs::exists(index))
    throw std::runtime_error(dir.string() + " has neither model.safetensors nor model.safetensors.index.json");
  nlohmann::json j = readJson(index);
  if (!j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object())
    throw std::runtime_error(index.string() + ": needs a weight_map object");
  std::vector<fs::path> files;
  std::set<std::string> seen;
  for (const auto& [name, shard] : j["weight_map"].items()) {
    if (!shard.is_string()) throw std::runtime_error(index.string() + ": weight_map." + name + " is not a file name");
    auto f = shard.get<std::string>();
    if (f.empty() || fs::path(f).has_parent_path() || f == "." || f == "..")
      throw std::runtime_error(index.string() + ": shard '" + f + "' is not a file name in the directory");
    if (seen.insert(f).second) files.push_back(dir / f);
  }
  if (files.empty()) throw std::runtime_error(index.string() + ": the weight_map is empty");
  return files;
}

}  // namespace xtrap
