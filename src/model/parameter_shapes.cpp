// PLACEHOLDER on branch load until the model engineer's src/model/parameter_shapes.cpp lands (take
// theirs at the merge): the decoder parameters the pretrained families use, named as the brief of
// issue 77 lists them.
#include "model/parameter_shapes.h"

namespace xtrap {

std::map<std::string, std::vector<int64_t>> parameterShapes(const ModelConfig& c) {
  std::map<std::string, std::vector<int64_t>> p;
  int64_t C = c.dModel, H = c.heads, KV = c.resolvedKvHeads(), D = c.resolvedHeadDim(), F = c.ffn;
  auto norm = [&](const std::string& name, int64_t n) {
    p[name + ".weight"] = {n};
    if (c.norm == "layer") p[name + ".bias"] = {n};
  };
  auto linear = [&](const std::string& name, int64_t out, int64_t in, bool bias) {
    p[name + ".weight"] = {out, in};
    if (bias) p[name + ".bias"] = {out};
  };
  p["token_embedding.weight"] = {c.vocabSize, C};
  if (c.embeddingNorm) norm("embedding_norm", C);
  for (int64_t l = 0; l < c.layers; ++l) {
    std::string b = "blocks." + std::to_string(l) + ".";
    norm(b + "ln1", C);
    norm(b + "ln2", C);
    if (c.blockNorms == "sandwich") {
      norm(b + "attn_out_norm", C);
      norm(b + "mlp_out_norm", C);
    }
    linear(b + "attn.qkv", (H + 2 * KV) * D, C, c.resolvedQkvBias());
    linear(b + "attn.out", C, H * D, c.linearBiases);
    if (c.qkNorm) {
      norm(b + "attn.q_norm", D);
      norm(b + "attn.k_norm", D);
    }
    linear(b + "fc1", c.gatedMlp ? 2 * F : F, C, c.linearBiases);
    linear(b + "fc2", C, F, c.linearBiases);
  }
  if (c.finalNorm) norm("ln_final", C);
  if (!c.tiedHead) p["head.weight"] = {c.vocabSize, C};
  return p;
}

}  // namespace xtrap
