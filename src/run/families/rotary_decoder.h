#pragma once
// What the rotary families (llama, mistral, qwen2, qwen3, phi3, gemma) share, following
// transformers' LlamaConfig and modeling_llama.py: the config keys of a pre-norm RMSNorm decoder
// with grouped-query attention, gated MLP and rotary positions, and the "model.layers.N.*" tensor
// names. Each family's file adds its own keys and tensors to these.
#include <string>
#include <vector>

#include "run/pretrained_family.h"

namespace xtrap {

// Keys read by readRotaryDecoder(), and a family's `extra` ones.
std::vector<std::string> rotaryDecoderComputed(std::initializer_list<const char*> extra);

// What differs between the families' config classes where a key is absent.
struct RotaryDecoderDefaults {
  bool tied = false;  // tie_word_embeddings
  const char* activationKey = "hidden_act";
  std::string activation = "silu";
  double ropeTheta = 10000.0;
  int64_t headDim = 0;             // 0: hidden_size / num_attention_heads
  bool yarnMeansLongrope = false;  // Phi3Config reads rope type "yarn" as longrope
};

// The shared settings: vocab_size, hidden_size, intermediate_size, num_hidden_layers,
// num_attention_heads, num_key_value_heads, head_dim, rms_norm_eps, the rotary settings
// (run/rope_config.h: rope_theta, rope_scaling / rope_parameters, partial_rotary_factor, a local
// base), max_position_embeddings (contextLength: original_max_position_embeddings where given),
// tie_word_embeddings, bos_token_id (the context token, else eos). The activation (silu,
// gelu_pytorch_tanh / gelu_new (gelu-tanh), gelu, relu; other names refused) from
// defaults.activationKey.
PretrainedConfig readRotaryDecoder(const ConfigReader& r, const std::string& modelType,
                                   const RotaryDecoderDefaults& defaults);

// The sliding window of the layers `layerTypes` names "sliding_attention" (a list of one entry per
// layer, "sliding_attention" or "full_attention"); an error naming the key for anything else.
void applyLayerTypes(const ConfigReader& r, const std::vector<std::string>& layerTypes, int64_t window, ModelConfig& m);

// model.embed_tokens, model.layers.N.{input_layernorm, post_attention_layernorm,
// self_attn.{q,k,v,o}_proj (q|k|v concatenated), mlp.{gate,up,down}_proj (gate|up)}, model.norm,
// lm_head when untied; q/k/v and output biases where the config has them, q_norm/k_norm with qkNorm.
// Names without the "model." prefix (the family strips it).
TensorMap rotaryDecoderTensors(const ModelConfig& c);

}  // namespace xtrap
