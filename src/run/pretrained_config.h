#pragma once
// A Hugging Face model directory (config.json, model.safetensors or a sharded
// model.safetensors.index.json, tokenizer.json) of an ALiBi family xtrap computes exactly:
//  - bloom (transformers' modeling_bloom.py): LayerNorm on the word embeddings, pre-LN blocks,
//    biases on every Linear and LayerNorm, tanh-approximated GELU, Press's slopes, final
//    LayerNorm, output tied to the embedding, no embedding scale.
//  - mpt (llm-foundry's modeling_mpt.py): no biases (LayerNorms without bias), exact GELU,
//    clip_qkv, slopes 2^(-h * alibi_bias_max / n') with alibi_bias_max from the config (as
//    llm-foundry does; the transformers port always uses 8), no length limit from max_seq_len.
// Both become settings of xtrap's own transformer (ModelConfig); run/pretrained_weights.h maps
// the tensors' names and layouts onto it. Torch-free.
#include <filesystem>
#include <string>
#include <vector>

#include "model/model_config.h"

namespace xtrap {

struct PretrainedConfig {
  std::string modelType;  // bloom | mpt
  ModelConfig model;
  int32_t contextToken = 0;  // the id the first scored token is predicted from (bos, else eos)
};

// A directory holding config.json and no run.json.
bool isPretrainedDirectory(const std::filesystem::path& dir);

// Reads dir/config.json. Throws std::runtime_error, one line naming the file, for an unsupported
// model_type (naming bloom and mpt), a missing or ill-typed key, or a setting xtrap does not
// compute (named).
PretrainedConfig readPretrainedConfig(const std::filesystem::path& dir);

// What identifies a directory's model for caches and --verify, without reading its weights:
// "fnv1a64:<16 hex digits>" of config.json and, for each weight file in order, its name, size
// and safetensors header (every tensor's name, dtype, shape and offsets). One-line errors name
// a file that cannot be read or whose header length is impossible.
std::string pretrainedWeightsDigest(const std::filesystem::path& dir);

// The weight files: model.safetensors, or the distinct files model.safetensors.index.json's
// weight_map names, in order. One-line errors name the index or the missing file.
std::vector<std::filesystem::path> pretrainedWeightFiles(const std::filesystem::path& dir);

}  // namespace xtrap
