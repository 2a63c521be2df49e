#pragma once
// A Hugging Face model directory (config.json, model.safetensors or a sharded
// model.safetensors.index.json, tokenizer.json) of a family xtrap computes exactly: its
// config.json becomes settings of xtrap's own transformer (ModelConfig), by the family's mapping
// file in run/families/ (run/pretrained_family.h), and run/pretrained_weights.h maps its tensors
// onto that model. docs/pretrained.md lists the families and their keys. Torch-free.
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "model/model_config.h"

namespace xtrap {

struct PretrainedConfig {
  // The family's name: config.json's model_type, or the name of one of several families under it
  // (mosaicbert, jinabert; run/pretrained_family.h finds the family by it)
  std::string modelType;
  ModelConfig model;
  int32_t contextToken = 0;         // the id the first scored token is predicted from (bos, else eos)
  std::vector<int32_t> stopTokens;  // eos_token_id (one or a list): where generation stops
};

// A directory holding config.json and no run.json.
bool isPretrainedDirectory(const std::filesystem::path& dir);

// Reads dir/config.json. Throws std::runtime_error, one line naming the file, for an unsupported
// model_type (naming the supported ones), a missing or ill-typed key, or a setting xtrap does not
// compute (named).
PretrainedConfig readPretrainedConfig(const std::filesystem::path& dir);
// The same for a config already parsed; `file` names it in errors. `tensors`: the names of the
// checkpoint's tensors, which tell families under one model_type apart (MosaicBERT's fused Wqkv)
// and whether an encoder was saved with its masked-LM head; empty: the config alone decides.
PretrainedConfig parsePretrainedConfig(const nlohmann::json& config, const std::string& file,
                                       const std::set<std::string>& tensors = {});
// The names of the tensors in a directory's weight files, from their headers; empty when the
// directory has no weight file (the loader then names what is missing).
std::set<std::string> pretrainedTensorNames(const std::filesystem::path& dir);

// What identifies a directory's model for caches and --verify, without reading its weights:
// "fnv1a64:<16 hex digits>" of config.json and, for each weight file in order, its name, size
// and safetensors header (every tensor's name, dtype, shape and offsets). One-line errors name
// a file that cannot be read or whose header length is impossible.
std::string pretrainedWeightsDigest(const std::filesystem::path& dir);

// The weight files: model.safetensors, or the distinct files model.safetensors.index.json's
// weight_map names, in order. One-line errors name the index or the missing file.
std::vector<std::filesystem::path> pretrainedWeightFiles(const std::filesystem::path& dir);

}  // namespace xtrap
