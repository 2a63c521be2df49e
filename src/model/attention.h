#pragma once
// Multi-head self-attention with one optional bias provider (ALiBi family, T5) and one optional
// rotation (rotary). Two paths compute the same thing:
//  - full: materialises the (B, H, T, T) logits, with the (H|1, T, T) bias prepared once per
//    forward by the caller (cached across steps when it has no trainable parameters);
//  - block: queries in blocks of `queryBlock` rows, bias computed per block from the provider,
//    so memory grows with T * queryBlock instead of T^2 (long-context evaluation, probes).
// B = batch, T = sequence length, C = d_model, H = heads, D = C / H.
#include <torch/torch.h>

#include "model/position/attention_bias.h"
#include "model/position/rotary.h"

namespace xtrap {

// Receives post-softmax probabilities block by block (probes); probs is (B, H, Tq, Tk) for
// queries [q0, q0 + Tq) and keys [0, Tk).
struct AttentionObserver {
  virtual ~AttentionObserver() = default;
  virtual void onProbabilities(int64_t layer, int64_t q0, const torch::Tensor& probs) = 0;
};

struct AttentionContext {
  bool causal = true;
  AttentionBias* bias = nullptr;          // or nothing
  const Rotary* rotary = nullptr;         // or nothing
  torch::Tensor fullBias;                 // full path only: (H|1, T, T), undefined = no bias
  int64_t queryBlock = 0;                 // > 0 and < T: block path, at most this many query rows per block
  AttentionObserver* observer = nullptr;  // or nothing
};

// Bias of the provider plus the causal mask for queries [q0, q1), keys [k0, k1):
// (H|1, q1-q0, k1-k0), or undefined when there is nothing to add.
torch::Tensor attentionBiasBlock(AttentionBias* bias, bool causal, int64_t q0, int64_t q1, int64_t k0, int64_t k1);

// Query rows per block for a window of T tokens: at most `queryBlock`, fewer for long windows so
// that one block's logits stay near 2^20 elements per head (the attention's temporaries then stay
// flat in T; only the O(T) activations grow).
int64_t attentionBlockRows(int64_t T, int64_t queryBlock);

// Query rows per block when the causal full path skips the masked upper blocks; 0 = one piece.
int64_t causalSkipBlock(int64_t T);

struct AttentionImpl : torch::nn::Module {
  AttentionImpl(int64_t dModel, int64_t heads, double dropout, int64_t layerIndex);
  torch::Tensor forward(const torch::Tensor& x, const AttentionContext& ctx);  // (B,T,C) -> (B,T,C)

  int64_t heads, layerIndex;
  double dropout;
  torch::nn::Linear qkv{nullptr}, out{nullptr};
};
TORCH_MODULE(Attention);

}  // namespace xtrap
