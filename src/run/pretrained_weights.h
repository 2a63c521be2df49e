#pragma once
// Loading a Hugging Face checkpoint (run/pretrained_config.h) into xtrap's transformer: each
// parameter is read from the memory-mapped safetensors file that holds it, its name and layout
// mapped once (BLOOM's q/k/v rows, packed per head as [heads, 3, head_dim], permuted into xtrap's
// q-then-k-then-v rows), and converted from float32, float16 or bfloat16 into the parameter.
#include <filesystem>
#include <string>

#include "model/transformer.h"

namespace xtrap {

// Fills every parameter of `model` (built from the directory's config.json) from the directory's
// weights. Throws std::runtime_error, one line naming the file, for a missing tensor, a tensor
// whose shape or dtype does not match the config, a tensor the model does not use (the config
// does not match the checkpoint), a tensor in two shards, or a damaged file.
void loadPretrainedWeights(const std::filesystem::path& dir, const std::string& modelType, Transformer& model);

}  // namespace xtrap
