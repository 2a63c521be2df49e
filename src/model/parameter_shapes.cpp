#include "model/parameter_shapes.h"

#include <stdexcept>

#include "model/linear_bias_spec.h"

namespace xtrap {

std::map<std::string, std::vector<int64_t>> parameterShapes(const ModelConfig& c) {
  PositionMethod pos = c.position();
  bool learnedSlopes = isLinearBias(pos) && makeLinearBiasSpec(pos, c.heads, c.causal()).learnedSlopes;
  if (c.head == "clap" || !c.adaptiveSoftmaxCutoffs.empty() || c.adaptiveInput || learnedSlopes ||
      !(pos == PositionMethod::None || pos == PositionMethod::Rotary || pos == PositionMethod::Learned ||
        isLinearBias(pos)))
    throw std::invalid_argument("parameter shapes: only lm heads with fixed positions (" + c.pos + ", " + c.head + ")");
  const int64_t V = c.vocabSize, C = c.dModel, H = c.heads, KV = c.resolvedKvHeads(), D = c.resolvedHeadDim();
  const int64_t F = c.ffn;
  std::map<std::string, std::vector<int64_t>> shapes;
  auto norm = [&](const std::string& name, int64_t width) {
    shapes[name + ".weight"] = {width};
    if (c.norm == "layer") shapes[name + ".bias"] = {width};
  };
  auto linear = [&](const std::string& name, int64_t out, int64_t in, bool bias) {
    shapes[name + ".weight"] = {out, in};
    if (bias) shapes[name + ".bias"] = {out};
  };
  shapes["token_embedding.weight"] = {V, C};
  if (c.embeddingNorm) {  // always a LayerNorm (BLOOM's, BERT's)
    shapes["embedding_norm.weight"] = {C};
    shapes["embedding_norm.bias"] = {C};
  }
  if (c.tokenTypes > 0) shapes["type_embedding.weight"] = {c.tokenTypes, C};
  if (pos == PositionMethod::Learned) shapes["position_embedding.weight"] = {c.positionTableSize(), C};
  for (int64_t l = 0; l < c.layers; ++l) {
    std::string b = "blocks." + std::to_string(l) + ".";
    norm(b + "ln1", C);
    linear(b + "attn.qkv", (H + 2 * KV) * D, C, c.resolvedQkvBias());
    linear(b + "attn.out", C, H * D, c.linearBiases);
    if (c.qkNorm) {
      norm(b + "attn.q_norm", D);
      norm(b + "attn.k_norm", D);
    }
    norm(b + "ln2", C);
    if (c.blockNorms == "sandwich") {
      norm(b + "attn_out_norm", C);
      norm(b + "mlp_out_norm", C);
    }
    linear(b + "fc1", c.gatedMlp ? 2 * F : F, C, c.resolvedFc1Bias());
    linear(b + "fc2", C, F, c.linearBiases);
  }
  if (c.finalNorm) norm("ln_final", C);
  if (!c.tiedHead) shapes["head.weight"] = {V, C};
  if (c.head == "roberta") {  // the masked-LM head: dense, LayerNorm, the tied decoder's bias
    linear("head.dense", C, C, true);
    shapes["head.norm.weight"] = {C};
    shapes["head.norm.bias"] = {C};
    shapes["head.bias"] = {V};
  }
  return shapes;
}

}  // namespace xtrap
