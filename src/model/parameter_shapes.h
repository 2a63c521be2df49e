#pragma once
// The parameters a ModelConfig's transformer has, by name and shape, without building it: what a
// loader checks a checkpoint's tensors against before allocating anything (a 7B config would
// need 28 GB before its first error otherwise). tests/test_model.cpp checks it against the
// named_parameters of built models. Torch-free.
// V = vocabulary, C = d_model, H = heads, KV = key/value heads, D = head dimension, F = ffn.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "model/model_config.h"

namespace xtrap {

// Every parameter of TransformerImpl(config), its name as named_parameters() gives it, for the
// lm, roberta (BERT's masked-LM head) and no head, without adaptive softmax or input, and the
// fixed ALiBi, rotary, learned and no-position methods. Throws std::invalid_argument for other
// configurations.
std::map<std::string, std::vector<int64_t>> parameterShapes(const ModelConfig& config);

}  // namespace xtrap
