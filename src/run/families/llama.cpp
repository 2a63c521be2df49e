// llama (Llama 1-3.x, TinyLlama, SmolLM) and mistral: transformers' configuration_llama.py /
// modeling_llama.py and configuration_mistral.py / modeling_mistral.py. The shared decoder
// (rotary_decoder.h) is the whole of Llama; Mistral adds a sliding window on every layer.
#include <fmt/format.h>

#include "run/families/families.h"
#include "run/families/rotary_decoder.h"

namespace xtrap {
namespace {

PretrainedConfig readLlama(const ConfigReader& r) {
  PretrainedConfig p = readRotaryDecoder(r, "llama", {});
  // attention_bias: q, k, v and o; mlp_bias: gate, up and down. xtrap has one switch for q/k/v
  // and one for every other Linear, so the two must agree.
  bool attention = r.flag("attention_bias", false), mlp = r.flag("mlp_bias", false);
  if (attention != mlp)
    r.fail(
        fmt::format("attention_bias {} with mlp_bias {} is not supported (xtrap's output projection and MLP "
                    "share one bias setting)",
                    attention, mlp));
  p.model.qkvBias = attention;
  p.model.linearBiases = mlp;
  return p;
}

PretrainedConfig readMistral(const ConfigReader& r) {
  PretrainedConfig p = readRotaryDecoder(r, "mistral", {});
  p.model.attentionWindow = r.integer("sliding_window", 0);  // null: none (Mistral v0.2 on)
  return p;
}

}  // namespace

const PretrainedFamily& llamaFamily() {
  static const PretrainedFamily f{{"llama"},
                                  rotaryDecoderComputed({"hidden_act", "attention_bias", "mlp_bias"}),
                                  // pretraining_tp > 1 only splits the products into slices summed in another order
                                  // (Meta's tensor-parallel training); transformers' current Llama ignores it.
                                  {"pretraining_tp"},
                                  {},
                                  {"model."},
                                  readLlama,
                                  rotaryDecoderTensors};
  return f;
}

const PretrainedFamily& mistralFamily() {
  static const PretrainedFamily f{
      {"mistral"},         rotaryDecoderComputed({"hidden_act", "sliding_window"}), {}, {}, {"model."}, readMistral,
      rotaryDecoderTensors};
  return f;
}

}  // namespace xtrap
