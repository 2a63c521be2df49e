#pragma once
// One pretrained family (a config.json `model_type`): which config keys it reads into xtrap's
// ModelConfig, which it knows leave the numbers alone, which it refuses unless they hold the one
// value xtrap computes; and where each xtrap parameter comes from among the checkpoint's tensors.
// Each family is one short file in run/families/; family names appear nowhere below run/ (STYLE.md
// item 9). Torch-free: the loader (run/pretrained_weights.h) applies the tensor map.
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "run/config_reader.h"
#include "run/pretrained_config.h"

namespace xtrap {

// A layout change between the checkpoint's rows and xtrap's.
enum class TensorLayout {
  AsStored,
  HeadsThenQkv,  // rows [H, 3, D] (BLOOM's query_key_value) -> xtrap's [3, H, D]
};

// One xtrap parameter's source: checkpoint tensors (names without the family's prefix)
// concatenated along dim 0 in this order (q, k, v; gate, up); none: the parameter is zeros.
struct TensorSource {
  std::vector<std::string> names;
  TensorLayout layout = TensorLayout::AsStored;
  std::vector<int64_t> rows;  // several names: the rows each one must have (q: H * D, k and v: KV * D)
  // One name: other names the same tensor is saved under (BERT's tied cls.predictions.bias and
  // cls.predictions.decoder.bias); the first present is read, the others are copies.
  std::vector<std::string> alsoSavedAs;
};
using TensorMap = std::map<std::string, TensorSource>;  // xtrap parameter name -> source

// A key xtrap does not compute: accepted only absent, null or equal to `accepted`.
struct RefusedKey {
  std::string key;  // nested keys as "attn_config.qk_ln"
  nlohmann::json accepted;
  std::string why;  // what xtrap would have to compute, for the error and docs/pretrained.md
};

// The names of a checkpoint's tensors as stored (prefixes included); empty where unknown.
using TensorNames = std::set<std::string>;

// How `xtrap export --hf` writes an xtrap model as the family's model type (the inverse of `read`
// and `tensors`); families without one are read only.
struct FamilyExporter {
  // Why the model type does not compute `model` exactly (one line naming the setting and the
  // training flag that avoids it); empty when it does. `model` is the exported one: untied head,
  // no embedding scale (export/hf_export.h folds both).
  std::string (*refusal)(const ModelConfig& model) = nullptr;
  // config.json for `model`; `eosId` the id of the end-of-line token, also the context token.
  nlohmann::json (*config)(const ModelConfig& model, int32_t eosId) = nullptr;
  // Prepended to the names `tensors` gives, but for those in `unprefixed` (the LM head outside
  // the base model's prefix).
  std::string prefix;
  std::vector<std::string> unprefixed;
};

struct PretrainedFamily {
  std::vector<std::string> modelTypes;  // the config.json model_type values it reads
  std::vector<std::string> computed;    // read into the settings (the reader allows no others)
  std::vector<std::string> inert;       // read by the reference code but not changing the logits
  std::vector<RefusedKey> refused;
  std::vector<std::string> tensorPrefixes;  // stripped from checkpoint names where present
  PretrainedConfig (*read)(const ConfigReader& config);
  TensorMap (*tensors)(const ModelConfig& model);
  // Several families under one model_type (MosaicBERT, JinaBERT and BERT all say "bert"): the
  // family's own name (run.json's and the rows' model type; empty: its model_type), and whether a
  // config and its tensors' names are this family's (null: every config of its model types).
  std::string name;
  bool (*recognises)(const nlohmann::json& config, const TensorNames& tensors) = nullptr;
  // Encoders: the tensor (without prefix) whose absence means the checkpoint was saved without
  // its masked-LM head (head "none": features and probes only).
  std::string headTensor;
  // Tensors (without prefix; a trailing '.' names a prefix) the model does not read: heads of
  // other tasks (BERT's pooler and next-sentence head), tied copies, saved buffers.
  std::vector<std::string> unreadTensors;
  FamilyExporter exporter;
};

// Every family, in the order docs/pretrained.md lists them.
const std::vector<const PretrainedFamily*>& pretrainedFamilies();

// What every family's config starts from: a decoder (causal LM) with position method `pos`, an lm
// head, no dropout, no embedding scale, a final norm; the family sets the rest.
PretrainedConfig pretrainedDecoder(const std::string& modelType, const std::string& pos);
// The family named `name` (PretrainedConfig::modelType: its name, else one of its model types);
// nullptr for none.
const PretrainedFamily* findPretrainedFamily(const std::string& name);
// The family reading a config of model_type `modelType` with these tensors: the first that lists
// the type and recognises the config; nullptr for none.
const PretrainedFamily* recognisePretrainedFamily(const std::string& modelType, const nlohmann::json& config,
                                                  const TensorNames& tensors);
// Whether a tensor (without prefix) is one of the family's unread tensors.
bool isUnreadTensor(const PretrainedFamily& family, const std::string& name);

// Keys of Hugging Face's PretrainedConfig and of saved configs that no family's numbers depend on
// (names, ids, dropout at inference, initialisation, caching, parallelism plans).
const std::vector<std::string>& commonInertKeys();
// Keys every family refuses (quantized or otherwise transformed weights).
const std::vector<RefusedKey>& commonRefusedKeys();

// The family's reader: the keys of `computed` only.
ConfigReader familyReader(const PretrainedFamily& family, const nlohmann::json& config, const std::string& file);

// docs/pretrained.md's generated part: every model_type with its computed, inert and refused keys.
std::string pretrainedKeysMarkdown();

}  // namespace xtrap
