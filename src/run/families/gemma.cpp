// gemma, gemma2 and gemma3_text: transformers' configuration_gemma*.py / modeling_gemma*.py.
// All: RMSNorm x_hat * (1 + w), embeddings times sqrt(hidden) rounded to the compute precision,
// GeGLU (hidden_activation; transformers ignores hidden_act), head tied, head_dim 256 by default.
// gemma2 and gemma3_text: four norms a block (sandwich), scale query_pre_attn_scalar^-0.5, a
// sliding window on some layers. gemma2: soft-caps (50 on attention, 30 on the logits unless set,
// null for none), windows on even layers. gemma3_text: q/k norms, no soft-caps unless set, windows
// on all but every sliding_window_pattern-th layer (or as layer_types says), local layers rotated
// with rope_local_base_freq and without rope scaling. Multimodal gemma3 (text_config) is refused.
#include <fmt/format.h>

#include <cmath>

#include "run/families/families.h"
#include "run/families/rotary_decoder.h"

namespace xtrap {
namespace {

PretrainedConfig readCommon(const ConfigReader& r, const std::string& type, double ropeTheta) {
  PretrainedConfig p = readRotaryDecoder(r, type, {true, "hidden_activation", "gelu_pytorch_tanh", ropeTheta, 256});
  ModelConfig& m = p.model;
  m.norm = "rms-one-plus";
  m.scaleEmbedding = true;
  m.embeddingScaleRounded = true;
  return p;
}

// A soft-cap: the class default when the key is absent, none when it is null.
double softcap(const ConfigReader& r, const char* key, double classDefault) {
  if (r.json().contains(key) && r.json()[key].is_null()) return 0.0;
  double cap = r.number({key}, classDefault);
  if (cap < 0) r.fail(std::string(key) + " must be positive or null");
  return cap;
}

void readSandwich(const ConfigReader& r, ModelConfig& m, int64_t windowDefault) {
  m.blockNorms = "sandwich";
  double scalar = r.number({"query_pre_attn_scalar"}, 256.0);
  if (!(scalar > 0)) r.fail("query_pre_attn_scalar must be positive");
  m.queryScale = 1.0 / std::sqrt(scalar);
  m.attentionWindow = r.integer("sliding_window", windowDefault);
}

PretrainedConfig readGemma(const ConfigReader& r) { return readCommon(r, "gemma", 10000.0); }

PretrainedConfig readGemma2(const ConfigReader& r) {
  PretrainedConfig p = readCommon(r, "gemma2", 10000.0);
  ModelConfig& m = p.model;
  readSandwich(r, m, 4096);
  m.attentionSoftcap = softcap(r, "attn_logit_softcapping", 50.0);
  m.finalSoftcap = softcap(r, "final_logit_softcapping", 30.0);
  std::vector<std::string> types = r.texts("layer_types");
  for (int64_t l = int64_t(types.size()) > 0 ? m.layers : 0; l < m.layers; ++l)
    types.push_back(l % 2 == 0 ? "sliding_attention" : "full_attention");
  applyLayerTypes(r, types, m.attentionWindow, m);
  return p;
}

PretrainedConfig readGemma3(const ConfigReader& r) {
  PretrainedConfig p = readCommon(r, "gemma3_text", 1e6);
  ModelConfig& m = p.model;
  readSandwich(r, m, 4096);
  m.qkNorm = true;
  m.attentionSoftcap = softcap(r, "attn_logit_softcapping", 0.0);
  m.finalSoftcap = softcap(r, "final_logit_softcapping", 0.0);
  if (m.rotaryLocalBase == 0) m.rotaryLocalBase = 10000.0;  // Gemma3TextConfig's rope_local_base_freq
  if (!(m.rotaryLocalBase > 1)) r.fail("rope_local_base_freq must be greater than 1");
  std::vector<std::string> types = r.texts("layer_types");
  int64_t pattern = r.integer("sliding_window_pattern", 6);
  for (int64_t l = int64_t(types.size()) > 0 ? m.layers : 0; l < m.layers; ++l)
    types.push_back((l + 1) % pattern != 0 ? "sliding_attention" : "full_attention");
  applyLayerTypes(r, types, m.attentionWindow, m);
  return p;
}

TensorMap sandwichTensors(const ModelConfig& c) {
  TensorMap t = rotaryDecoderTensors(c);
  for (int64_t l = 0; l < c.layers; ++l) {
    std::string b = fmt::format("blocks.{}.", l), h = fmt::format("layers.{}.", l);
    t[b + "attn_out_norm.weight"] = {{h + "post_attention_layernorm.weight"}};
    t[b + "ln2.weight"] = {{h + "pre_feedforward_layernorm.weight"}};
    t[b + "mlp_out_norm.weight"] = {{h + "post_feedforward_layernorm.weight"}};
  }
  return t;
}

// q, k, v and o biases without MLP ones: xtrap's output projection shares the MLP's bias setting.
const RefusedKey kGemmaBias{"attention_bias", false, "biases on q, k, v and o but not the MLP"};

}  // namespace

const PretrainedFamily& gemmaFamily() {
  static const PretrainedFamily f{{"gemma"},           rotaryDecoderComputed({"hidden_activation"}),
                                  {"hidden_act"},      {kGemmaBias},
                                  {"model."},          readGemma,
                                  rotaryDecoderTensors};
  return f;
}

const PretrainedFamily& gemma2Family() {
  static const PretrainedFamily f{
      {"gemma2"},
      rotaryDecoderComputed({"hidden_activation", "query_pre_attn_scalar", "sliding_window", "attn_logit_softcapping",
                             "final_logit_softcapping", "layer_types"}),
      {"hidden_act", "cache_implementation"},
      {kGemmaBias},
      {"model."},
      readGemma2,
      sandwichTensors};
  return f;
}

const PretrainedFamily& gemma3Family() {
  static const PretrainedFamily f{
      {"gemma3_text"},
      rotaryDecoderComputed({"hidden_activation", "query_pre_attn_scalar", "sliding_window", "attn_logit_softcapping",
                             "final_logit_softcapping", "layer_types", "rope_local_base_freq",
                             "sliding_window_pattern"}),
      {"hidden_act", "cache_implementation"},
      {kGemmaBias},
      {"model."},
      readGemma3,
      sandwichTensors};
  return f;
}

}  // namespace xtrap
