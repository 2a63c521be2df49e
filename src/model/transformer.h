#pragma once
// The xtrap transformer: pre-LN blocks over token embeddings, one position method, one output
// head. Decoders are causal LMs; encoders are bidirectional (masked LM).
// B = batch, T = sequence length, C = d_model, V = vocabulary, N = rows scored.
#include <torch/torch.h>

#include <memory>
#include <optional>

#include "model/attention.h"
#include "model/model_config.h"
#include "model/output_head.h"
#include "model/position/linear_bias.h"

namespace xtrap {

struct TransformerBlockImpl : torch::nn::Module {
  TransformerBlockImpl(const ModelConfig& c, int64_t index);
  torch::Tensor forward(torch::Tensor x, const AttentionContext& ctx);  // (B,T,C) -> (B,T,C)

  torch::nn::LayerNorm ln1{nullptr}, ln2{nullptr};
  Attention attn{nullptr};
  torch::nn::Linear fc1{nullptr}, fc2{nullptr};
  double dropout;
};
TORCH_MODULE(TransformerBlock);

struct ForwardOptions {
  int64_t queryBlock = 0;                 // > 0: block attention path (O(T) memory)
  AttentionObserver* observer = nullptr;  // probes
};

struct TransformerImpl : torch::nn::Module {
  explicit TransformerImpl(ModelConfig config);

  torch::Tensor features(const torch::Tensor& tokens, const ForwardOptions& opt = {});  // (B,T) -> (B,T,C)
  torch::Tensor logits(const torch::Tensor& x) { return head->logits(x); }              // (N,C) -> (N,V)
  torch::Tensor tokenNll(const torch::Tensor& x, const torch::Tensor& targets) {        // (N)
    return head->nll(x, targets);
  }

  LinearBias* linearBias() const;  // ALiBi family, else nullptr
  AttentionBias* attentionBias() const { return bias_.get(); }
  Rotary* rotary() { return rotary_ ? &*rotary_ : nullptr; }
  // Call after changing slopes or rotary settings (interpolation): drops the cached full bias.
  void clearBiasCache() { cachedBias_ = torch::Tensor(); }

  ModelConfig config;
  torch::nn::Embedding tokenEmbedding{nullptr};     // (V, C)
  torch::nn::Embedding positionEmbedding{nullptr};  // learned: (maxPositions, C)
  torch::nn::ModuleList blocks{nullptr};
  torch::nn::LayerNorm lnFinal{nullptr};
  OutputHead head{nullptr};

 private:
  torch::Tensor fullBias(int64_t T);

  std::shared_ptr<AttentionBias> bias_;
  std::optional<Rotary> rotary_;
  torch::Tensor cachedBias_;  // full-path bias for the last T when it has no trainable parameters
  torch::Tensor sinusoidal_;  // (T_max, C) table, grown on demand
};
TORCH_MODULE(Transformer);

}  // namespace xtrap
