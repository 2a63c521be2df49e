// qwen2 (Qwen2, Qwen2.5) and qwen3: transformers' configuration_qwen2.py / modeling_qwen2.py and
// configuration_qwen3.py / modeling_qwen3.py. Qwen2: biases on q, k and v only. Qwen3: a per-head
// RMSNorm on q and k before the rotation, biases only with attention_bias. Both: a sliding window
// only when use_sliding_window, on the layers from max_window_layers on, or on those layer_types
// names "sliding_attention" (current transformers writes layer_types into saved configs).
#include "run/families/families.h"
#include "run/families/rotary_decoder.h"

namespace xtrap {
namespace {

void readWindow(const ConfigReader& r, ModelConfig& m) {
  int64_t window = r.flag("use_sliding_window", false) ? r.integer("sliding_window", 4096) : 0;
  std::vector<std::string> types = r.texts("layer_types");
  if (types.empty()) {
    int64_t first = r.integer("max_window_layers", 28);
    for (int64_t l = first; window > 0 && l < m.layers; ++l) types.push_back("sliding_attention");
    types.insert(types.begin(), size_t(std::min(first, m.layers)), "full_attention");
    if (window == 0) types.clear();
  }
  applyLayerTypes(r, types, window, m);
}

PretrainedConfig readQwen2(const ConfigReader& r) {
  PretrainedConfig p = readRotaryDecoder(r, "qwen2", {});
  p.model.qkvBias = true;
  readWindow(r, p.model);
  return p;
}

PretrainedConfig readQwen3(const ConfigReader& r) {
  PretrainedConfig p = readRotaryDecoder(r, "qwen3", {});
  p.model.qkNorm = true;
  readWindow(r, p.model);
  return p;
}

}  // namespace

const PretrainedFamily& qwen2Family() {
  static const PretrainedFamily f{
      {"qwen2"},
      rotaryDecoderComputed({"hidden_act", "use_sliding_window", "sliding_window", "max_window_layers", "layer_types"}),
      {},
      {},
      {"model."},
      readQwen2,
      rotaryDecoderTensors};
  return f;
}

const PretrainedFamily& qwen3Family() {
  static const PretrainedFamily f{
      {"qwen3"},
      rotaryDecoderComputed({"hidden_act", "use_sliding_window", "sliding_window", "max_window_layers", "layer_types"}),
      {},
      // q, k, v and o biases without MLP ones: xtrap's output projection
      // shares the MLP's bias setting.
      {{"attention_bias", false, "biases on q, k, v and o but not the MLP"}},
      {"model."},
      readQwen3,
      rotaryDecoderTensors};
  return f;
}

}  // namespace xtrap
