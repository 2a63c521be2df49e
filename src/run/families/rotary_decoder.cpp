#include "run/families/rotary_decoder.h"

#include <fmt/format.h>

#include "run/rope_config.h"

namespace xtrap {

std::vector<std::string> rotaryDecoderComputed(std::initializer_list<const char*> extra) {
  std::vector<std::string> keys{"vocab_size",
                                "hidden_size",
                                "intermediate_size",
                                "num_hidden_layers",
                                "num_attention_heads",
                                "num_key_value_heads",
                                "head_dim",
                                "rms_norm_eps",
                                "rope_theta",
                                "rope_scaling",
                                "rope_parameters",
                                "max_position_embeddings",
                                "original_max_position_embeddings",
                                "tie_word_embeddings",
                                "bos_token_id",
                                "eos_token_id"};
  keys.insert(keys.end(), extra.begin(), extra.end());
  return keys;
}

namespace {

std::string activation(const ConfigReader& r, const char* key, const std::string& fallback) {
  std::string name = r.text(key, fallback);
  if (name == "silu" || name == "swish") return "silu";
  if (name == "gelu_pytorch_tanh" || name == "gelu_new") return "gelu-tanh";
  if (name == "gelu" || name == "relu") return name;
  r.fail(r.key(key) + " '" + name + "' is not supported (silu, gelu_pytorch_tanh, gelu_new, gelu, relu)");
}

}  // namespace

PretrainedConfig readRotaryDecoder(const ConfigReader& r, const std::string& modelType,
                                   const RotaryDecoderDefaults& defaults) {
  PretrainedConfig p = pretrainedDecoder(modelType, "rotary");
  ModelConfig& m = p.model;
  m.norm = "rms";
  m.gatedMlp = true;
  m.linearBiases = false;
  m.vocabSize = r.integer({"vocab_size"});
  m.dModel = r.integer({"hidden_size"});
  m.ffn = r.integer({"intermediate_size"});
  m.layers = r.integer({"num_hidden_layers"});
  m.heads = r.integer({"num_attention_heads"});
  m.kvHeads = r.integer("num_key_value_heads", m.heads);
  if (m.heads % m.kvHeads != 0)
    r.fail(fmt::format("num_key_value_heads ({}) must divide num_attention_heads ({})", m.kvHeads, m.heads));
  // head_dim where given (Qwen3-0.6B: 16 heads of 128 in a width of 1024), else hidden / heads.
  if (!r.has("head_dim") && m.dModel % m.heads != 0)
    r.fail(fmt::format("num_attention_heads ({}) must divide hidden_size ({}) without head_dim", m.heads, m.dModel));
  m.headDim = r.integer("head_dim", defaults.headDim > 0 ? defaults.headDim : m.dModel / m.heads);
  m.activation = activation(r, defaults.activationKey, defaults.activation);
  m.normEps = r.number({"rms_norm_eps"}, 1e-6);
  if (!(m.normEps > 0)) r.fail("rms_norm_eps must be positive");
  RopeConfig rope = readRopeConfig(r.json(), r.file(), m.headDim, {defaults.ropeTheta, defaults.yarnMeansLongrope});
  m.rotaryBase = rope.base;
  m.rotaryFraction = rope.rotaryFraction;
  m.ropeScaling = rope.scaling;
  m.rotaryLocalBase = rope.localBase;
  // The training length: the one rope scaling extends from where the config names one.
  m.contextLength = r.integer("original_max_position_embeddings", r.integer({"max_position_embeddings"}));
  m.tiedHead = r.flag("tie_word_embeddings", defaults.tied);
  p.contextToken = int32_t(r.has("bos_token_id") ? r.integer({"bos_token_id"}) : r.integer("eos_token_id", 0));
  return p;
}

void applyLayerTypes(const ConfigReader& r, const std::vector<std::string>& layerTypes, int64_t window,
                     ModelConfig& m) {
  if (layerTypes.empty()) return;
  if (int64_t(layerTypes.size()) != m.layers)
    r.fail(fmt::format("layer_types has {} entries for {} layers", layerTypes.size(), m.layers));
  m.windowedLayers.clear();
  for (int64_t l = 0; l < m.layers; ++l) {
    const std::string& t = layerTypes[size_t(l)];
    if (t == "sliding_attention")
      m.windowedLayers.push_back(l);
    else if (t != "full_attention")
      r.fail("layer_types entry '" + t + "' is not supported (sliding_attention, full_attention)");
  }
  if (!m.windowedLayers.empty() && window < 1) r.fail("layer_types names sliding layers but sliding_window is unset");
  m.attentionWindow = m.windowedLayers.empty() ? 0 : window;
  // Every layer windowed: the empty list says so.
  if (int64_t(m.windowedLayers.size()) == m.layers) m.windowedLayers.clear();
}

TensorMap rotaryDecoderTensors(const ModelConfig& c) {
  TensorMap t;
  int64_t q = c.heads * c.resolvedHeadDim(), kv = c.resolvedKvHeads() * c.resolvedHeadDim();
  t["token_embedding.weight"] = {{"embed_tokens.weight"}};
  for (int64_t l = 0; l < c.layers; ++l) {
    std::string b = fmt::format("blocks.{}.", l), h = fmt::format("layers.{}.", l);
    t[b + "ln1.weight"] = {{h + "input_layernorm.weight"}};
    t[b + "ln2.weight"] = {{h + "post_attention_layernorm.weight"}};
    std::string a = h + "self_attn.";
    t[b + "attn.qkv.weight"] = {
        {a + "q_proj.weight", a + "k_proj.weight", a + "v_proj.weight"}, TensorLayout::AsStored, {q, kv, kv}};
    if (c.resolvedQkvBias())
      t[b + "attn.qkv.bias"] = {
          {a + "q_proj.bias", a + "k_proj.bias", a + "v_proj.bias"}, TensorLayout::AsStored, {q, kv, kv}};
    t[b + "attn.out.weight"] = {{a + "o_proj.weight"}};
    if (c.qkNorm) {
      t[b + "attn.q_norm.weight"] = {{a + "q_norm.weight"}};
      t[b + "attn.k_norm.weight"] = {{a + "k_norm.weight"}};
    }
    std::string f = h + "mlp.";
    t[b + "fc1.weight"] = {{f + "gate_proj.weight", f + "up_proj.weight"}, TensorLayout::AsStored, {c.ffn, c.ffn}};
    t[b + "fc2.weight"] = {{f + "down_proj.weight"}};
    if (c.linearBiases) {
      t[b + "attn.out.bias"] = {{a + "o_proj.bias"}};
      t[b + "fc1.bias"] = {{f + "gate_proj.bias", f + "up_proj.bias"}, TensorLayout::AsStored, {c.ffn, c.ffn}};
      t[b + "fc2.bias"] = {{f + "down_proj.bias"}};
    }
  }
  t["ln_final.weight"] = {{"norm.weight"}};
  if (!c.tiedHead) t["head.weight"] = {{"lm_head.weight"}};
  return t;
}

}  // namespace xtrap
