#pragma once
// Loading a Hugging Face checkpoint (run/pretrained_config.h) into xtrap's transformer: every
// tensor's name, dtype and shape is checked against the parameters the config implies
// (model/parameter_shapes.h) from the safetensors headers, before anything is allocated; then each
// parameter is read from the file that holds it (pread, straight into the parameter, or into its
// rows for a parameter concatenated from several tensors (q, k, v; gate, up), where nothing
// changes on the way), its name and layout mapped by the family's file (run/pretrained_family.h;
// BLOOM's q/k/v rows, packed per head, permuted into xtrap's q-then-k-then-v rows), and
// converted from float32, float16 or bfloat16 into the parameter.
//
// Precision held: float32, except where the evaluation computes in bfloat16 (autocast) and every
// weight matrix of the checkpoint is float16 or bfloat16: then the matrices (embedding, q/k/v,
// attention output, both FFN layers) are held in bfloat16, 2 bytes a value, as the checkpoint has
// them (float16 converted once: bf16 keeps float16's 10-bit mantissa to 7 bits, and its range).
// Autocast casts every matrix to bf16 before its product anyway, so the products are those of
// float32-held weights; only the embedding rows, which no product reads, are now rounded to bf16.
// Vectors (LayerNorm weights and biases, Linear biases) stay float32: LibTorch 1.13's CPU
// LayerNorm takes its input and parameters in one type, and the residual stream is float32.
#include <filesystem>
#include <string>

#include "model/transformer.h"
#include "run/pretrained_family.h"
#include "util/execution_context.h"

namespace xtrap {

// Builds the model of `config` (the directory's config.json), in the precision above for `ctx`,
// on ctx's device, and fills every parameter from the directory's weights (eval mode is the
// caller's). Throws std::runtime_error, one line naming the file, for a missing tensor, a tensor
// whose shape or dtype does not match the config, a tensor the model does not use (the config
// does not match the checkpoint; a tied head's stored lm_head.weight excepted), a tensor in two
// shards, or a damaged file.
// The inverse of the loader's layout change: an xtrap parameter's rows as a checkpoint of
// `layout` stores them (export/hf_export.h).
torch::Tensor storedLayout(const torch::Tensor& parameter, TensorLayout layout, int64_t heads);

Transformer loadPretrainedModel(const std::filesystem::path& dir, const std::string& modelType,
                                const ModelConfig& config, const ExecutionContext& ctx);

}  // namespace xtrap
