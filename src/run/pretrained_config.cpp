#include "run/pretrained_config.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <stdexcept>

#include "run/config_reader.h"
#include "run/pretrained_family.h"
#include "run/safetensors_reader.h"
#include "util/fnv1a64.h"

namespace xtrap {
namespace fs = std::filesystem;

namespace {

// The top-level name of a (possibly nested) table key.
std::string topLevel(const std::string& key) { return key.substr(0, key.find('.')); }

// The value of a nested key "a.b.c"; nullptr where absent or null.
const nlohmann::json* lookup(const nlohmann::json& j, const std::string& key) {
  const nlohmann::json* v = &j;
  for (size_t start = 0;;) {
    size_t dot = key.find('.', start);
    std::string part = key.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (!v->is_object() || !v->contains(part) || (*v)[part].is_null()) return nullptr;
    v = &(*v)[part];
    if (dot == std::string::npos) return v;
    start = dot + 1;
  }
}

// The keys a family does not compute: refused ones must hold their accepted value; a key outside
// the family's table is refused where another family computes or refuses it (a config of another
// family under this model_type, or a setting this family's reference code would also ignore but
// that changes the numbers elsewhere), ignored otherwise (transformers ignores it too). Keys of a
// nested object the family reads (MPT's attn_config, ffn_config) must all be in its table.
void checkKeys(const PretrainedFamily& family, const std::string& type, const nlohmann::json& j,
               const std::string& file) {
  auto fail = [&](const std::string& why) { throw std::runtime_error(file + ": " + why); };
  std::vector<RefusedKey> refused = family.refused;
  refused.insert(refused.end(), commonRefusedKeys().begin(), commonRefusedKeys().end());
  for (const auto& k : refused)
    if (const auto* v = lookup(j, k.key); v && *v != k.accepted)
      fail(fmt::format("{} {} is not supported ({}; xtrap computes {} only)", k.key, v->dump(), k.why,
                       k.accepted.dump()));
  std::set<std::string> known(commonInertKeys().begin(), commonInertKeys().end());
  for (const auto* list : {&family.computed, &family.inert}) known.insert(list->begin(), list->end());
  for (const auto& k : refused) known.insert(k.key);
  std::set<std::string> elsewhere;
  for (const auto* f : pretrainedFamilies()) {
    for (const auto& k : f->computed) elsewhere.insert(topLevel(k));
    for (const auto& k : f->refused) elsewhere.insert(topLevel(k.key));
  }
  for (const auto& [key, value] : j.items()) {
    if (value.is_null()) continue;
    if (!known.count(key) && elsewhere.count(key))
      fail(fmt::format("{} is not read for model_type {}, and changes the numbers of other families", key, type));
    // A nested object whose keys the table lists: every key listed.
    if (!value.is_object() || !known.count(key)) continue;
    const std::string prefix = key + ".";  // a structured binding is not captured by a C++17 lambda
    bool listsInner =
        std::any_of(known.begin(), known.end(), [&](const std::string& k) { return k.rfind(prefix, 0) == 0; });
    for (const auto& [inner, innerValue] : value.items())
      if (listsInner && !innerValue.is_null() && !known.count(key + "." + inner))
        fail(fmt::format("{}.{} is not known to xtrap for model_type {}", key, inner, type));
  }
}

}  // namespace

bool isPretrainedDirectory(const fs::path& dir) {
  return fs::is_regular_file(dir / "config.json") && !fs::exists(dir / "run.json");
}

PretrainedConfig parsePretrainedConfig(const nlohmann::json& j, const std::string& file,
                                       const std::set<std::string>& tensors) {
  if (!j.is_object()) throw std::runtime_error(file + ": not a JSON object");
  std::string type = j.contains("model_type") && j["model_type"].is_string() ? j["model_type"].get<std::string>() : "";
  const PretrainedFamily* family = recognisePretrainedFamily(type, j, tensors);
  if (!family) {
    std::vector<std::string> names;
    for (const auto* f : pretrainedFamilies())
      for (const auto& t : f->modelTypes)
        if (std::find(names.begin(), names.end(), t) == names.end()) names.push_back(t);
    // Multimodal checkpoints (gemma3's text_config beside a vision tower) name their language
    // model's type inside; its tensors sit under other prefixes beside the vision tower's.
    bool multimodal = j.contains("text_config") && j["text_config"].is_object();
    throw std::runtime_error(fmt::format("{}: model_type '{}'{} is not supported (supported: {})", file, type,
                                         multimodal ? " (multimodal, with text_config)" : "", fmt::join(names, ", ")));
  }
  checkKeys(*family, type, j, file);
  PretrainedConfig p = family->read(familyReader(*family, j, file));
  if (!family->name.empty()) p.modelType = family->name;
  if (!family->headTensor.empty() && !tensors.empty()) {
    bool hasHead = std::any_of(tensors.begin(), tensors.end(), [&](const std::string& name) {
      for (const auto& prefix : family->tensorPrefixes)
        if (name == prefix + family->headTensor) return true;
      return name == family->headTensor;
    });
    if (!hasHead) p.model.head = "none";
  }
  try {
    p.model.validate();
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error(file + ": " + e.what());
  }
  if (p.contextToken >= p.model.vocabSize)
    throw std::runtime_error(
        fmt::format("{}: the context token {} (bos_token_id, else eos_token_id) is not below vocab_size {}", file,
                    p.contextToken, p.model.vocabSize));
  // Where generation stops: eos_token_id, one id or a list (Llama 3's), each a token of the model.
  if (j.contains("eos_token_id") && !j["eos_token_id"].is_null()) {
    const auto& eos = j["eos_token_id"];
    for (const auto& id : eos.is_array() ? eos : nlohmann::json::array({eos})) {
      if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= p.model.vocabSize)
        throw std::runtime_error(fmt::format("{}: eos_token_id must be token ids below vocab_size {}; it holds {}",
                                             file, p.model.vocabSize, id.dump()));
      p.stopTokens.push_back(int32_t(id.get<int64_t>()));
    }
  }
  return p;
}

std::set<std::string> pretrainedTensorNames(const fs::path& dir) {
  std::set<std::string> names;
  if (!fs::exists(dir / "model.safetensors") && !fs::exists(dir / "model.safetensors.index.json")) return names;
  for (const auto& path : pretrainedWeightFiles(dir)) {
    if (!fs::exists(path)) return {};  // the loader names the missing shard
    SafetensorsFile file(path);
    for (const auto& [name, t] : file.tensors()) names.insert(name);
  }
  return names;
}

PretrainedConfig readPretrainedConfig(const fs::path& dir) {
  fs::path file = dir / "config.json";
  return parsePretrainedConfig(readJsonFile(file.string()), file.string(), pretrainedTensorNames(dir));
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
  nlohmann::json j = readJsonFile(index.string());
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
