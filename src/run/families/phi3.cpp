// phi3 (Phi-3, Phi-3.5, Phi-4-mini): transformers' configuration_phi3.py / modeling_phi3.py. The
// Llama decoder with fused projections: qkv_proj rows already q|k|v, gate_up_proj rows gate|up;
// partial_rotary_factor rotates the first channels of each head; a sliding window on every layer
// where sliding_window is set (Phi-3-mini-4k: 2047).
#include "run/families/families.h"
#include "run/families/rotary_decoder.h"

namespace xtrap {
namespace {

PretrainedConfig readPhi3(const ConfigReader& r) {
  RotaryDecoderDefaults defaults;
  defaults.yarnMeansLongrope = true;
  PretrainedConfig p = readRotaryDecoder(r, "phi3", defaults);  // partial_rotary_factor: run/rope_config.h
  ModelConfig& m = p.model;
  m.attentionWindow = r.integer("sliding_window", 0);
  return p;
}

TensorMap phi3Tensors(const ModelConfig& c) {
  TensorMap t = rotaryDecoderTensors(c);
  for (int64_t l = 0; l < c.layers; ++l) {
    std::string b = "blocks." + std::to_string(l) + ".", h = "layers." + std::to_string(l) + ".";
    t[b + "attn.qkv.weight"] = {{h + "self_attn.qkv_proj.weight"}};
    t[b + "fc1.weight"] = {{h + "mlp.gate_up_proj.weight"}};
  }
  return t;
}

}  // namespace

const PretrainedFamily& phi3Family() {
  static const PretrainedFamily f{{"phi3"},
                                  rotaryDecoderComputed({"hidden_act", "partial_rotary_factor", "sliding_window"}),
                                  // attention_bias: saved by Phi-3 configs, read by no Phi-3 code.
                                  {"resid_pdrop", "embd_pdrop", "attention_bias"},
                                  {},
                                  {"model."},
                                  readPhi3,
                                  phi3Tensors};
  return f;
}

}  // namespace xtrap
