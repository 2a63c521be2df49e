#pragma once
// The tensor names BLOOM and GPT-NeoX share from Megatron-LM: each layer's input_layernorm,
// <attention>.query_key_value (rows per head [H, 3, D]) and <attention>.dense,
// post_attention_layernorm, mlp.dense_h_to_4h and mlp.dense_4h_to_h, every one with a bias.
#include <fmt/format.h>

#include <string>

#include "run/pretrained_family.h"

namespace xtrap {

// Adds xtrap's blocks.N.* parameters of `c`'s layers, their sources under `layerPrefix` + N + "."
// ("h." for BLOOM, "layers." for GPT-NeoX) and the attention module `attention`.
inline void addMegatronBlocks(TensorMap& t, const ModelConfig& c, const std::string& layerPrefix,
                              const std::string& attention) {
  auto both = [&](const std::string& ours, const std::string& theirs, TensorLayout layout = TensorLayout::AsStored) {
    t[ours + ".weight"] = {{theirs + ".weight"}, layout};
    t[ours + ".bias"] = {{theirs + ".bias"}, layout};
  };
  for (int64_t l = 0; l < c.layers; ++l) {
    std::string b = fmt::format("blocks.{}.", l), h = fmt::format("{}{}.", layerPrefix, l);
    both(b + "ln1", h + "input_layernorm");
    both(b + "attn.qkv", h + attention + ".query_key_value", TensorLayout::HeadsThenQkv);
    both(b + "attn.out", h + attention + ".dense");
    both(b + "ln2", h + "post_attention_layernorm");
    both(b + "fc1", h + "mlp.dense_h_to_4h");
    both(b + "fc2", h + "mlp.dense_4h_to_h");
  }
}

}  // namespace xtrap
