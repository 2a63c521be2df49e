#pragma once
// Multi-head self-attention with one optional bias provider (ALiBi family, T5) and one optional
// rotation (rotary). The attention itself is one of the paths of attention_plan.h, each one
// function here, all computing the same thing from the same bias provider:
//  - reference: materialises the (B, H, T, T) logits with the (H|1, T, T) bias prepared once per
//    forward by the caller (cached across steps when it has no trainable parameters);
//  - causal-skip: the same full bias, causal query blocks skip the masked upper-right blocks;
//  - block: queries in blocks, each block's bias computed from the provider, so memory grows with
//    T * block instead of T^2 (long-context evaluation, probes);
//  - sdpa (LibTorch 2.x): scaled_dot_product_attention with the full bias as an additive mask;
//  - recompute (CPU training): query blocks, each block's bias computed from the provider, whose
//    bias and probabilities the backward pass recomputes instead of keeping (recomputed_attention.h);
//  - fused-linear-bias (CUDA builds with the kernels, ALiBi family): one flash-style kernel that
//    computes the bias per tile from the LinearBiasSpec (linear_bias_attention_cuda.h).
// The bias is float32 and is added to float32 logits on every path, whatever the compute
// precision (the bias of a distant key is large: bfloat16 would round -m * 4000 to a multiple of
// 16, a KERPLE bias of -48 to one of 0.25): xtrap's own paths turn q.k into float32 before adding
// it, the fused kernel computes the ALiBi bias per tile in float32, and SDPA, which takes its
// mask in the query's precision, gets a bias only in float32 (attention_plan.h; a forced SDPA
// path with bf16 q runs in float32). Softmax is float32; probabilities times values runs in the
// compute precision.
// Grouped-query attention: KV key/value heads, each serving G = H / KV consecutive query heads
// (transformers' repeat_kv order); a group's G query heads are stacked along the query rows,
// (B, KV, G * T, D), so every product reads each key and value head once and no repeated copy of
// k or v exists. Sliding-window layers mask keys j <= i - W; the block path skips them.
// B = batch, T = sequence length, C = d_model, H = heads, KV = key/value heads, D = head dimension.
#include <torch/torch.h>

#include <optional>
#include <vector>

#include "model/attention_plan.h"
#include "model/context_extension.h"
#include "model/model_config.h"
#include "model/norm.h"
#include "model/position/attention_bias.h"
#include "model/position/rotary.h"

namespace xtrap {

// Receives post-softmax probabilities block by block (probes); probs is (B, H, Tq, Tk) for
// queries [q0, q0 + Tq) and keys [0, Tk), on the model's device.
struct AttentionObserver {
  virtual ~AttentionObserver() = default;
  virtual void onProbabilities(int64_t layer, int64_t q0, const torch::Tensor& probs) = 0;
};

// Incremental decoding (generation): every layer's keys and values so far, (B, KV, length, D)
// after their rotation. A forward with a cache attends its T new tokens (positions length ..
// length + T - 1) to every cached key and its own, and appends its keys and values.
struct KvCache {
  std::vector<torch::Tensor> keys, values;  // per layer (undefined before its first forward)
  int64_t length = 0;                       // positions cached
};

struct AttentionContext {
  AttentionPath path = AttentionPath::Reference;
  bool causal = true;
  AttentionBias* bias = nullptr;          // or nothing
  const Rotary* rotary = nullptr;         // or nothing
  torch::Tensor fullBias;                 // paths reading it: (H|1, T, T) float32, undefined = no bias
  int64_t queryBlock = 0;                 // block path: at most this many query rows per block
  AttentionObserver* observer = nullptr;  // or nothing
  // Sliding-window layers: their window, the full bias with it, and their rotation where it
  // differs (Gemma 3's local base); AttentionImpl::forward puts them in place for its layer.
  int64_t window = 0;                      // 0 = every earlier key
  torch::Tensor windowedFullBias;          // as fullBias, keys j <= i - window masked too
  const Rotary* windowedRotary = nullptr;  // or the global one
  double softcap = 0.0;                    // logits -> cap * tanh(logits / cap) before the bias; 0 = none
  KvCache* cache = nullptr;                // incremental decoding (causal models): path and full bias unused
  // Training-free context extension (decoders, evaluation): extendedAttention computes every layer,
  // whatever the path; q and k reach it unrotated.
  const ContextExtension* extension = nullptr;
};

// Bias of the provider plus the causal mask (and the sliding window's, `window` > 0) for queries
// [q0, q1), keys [k0, k1): (H|1, q1-q0, k1-k0) float32 on `options`' device, or undefined when
// there is nothing to add. The causal mask is added only where the provider does not already
// block every future key.
torch::Tensor attentionBiasBlock(AttentionBias* bias, bool causal, int64_t q0, int64_t q1, int64_t k0, int64_t k1,
                                 const torch::TensorOptions& options, int64_t window = 0);

// The paths. q: (B, H, T, D), already scaled but for the last two; k, v: (B, KV, T, D); each
// returns (B, H, T, D). Grouped keys and values (KV < H) and a soft-cap: the first three only.
// `dropout` is the attention-probability dropout in force (0 in eval mode).
torch::Tensor referenceAttention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                 const AttentionContext& ctx, double dropout, int64_t layer);
torch::Tensor causalSkipAttention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                  const AttentionContext& ctx, double dropout, int64_t layer);
torch::Tensor blockAttention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                             const AttentionContext& ctx, double dropout, int64_t layer);
// Incremental decoding: q (B, H, Tq, D) the last Tq of the Tk positions of k, v (B, KV, Tk, D),
// the bias computed for queries [Tk - Tq, Tk) from the provider; no dropout.
torch::Tensor cachedAttention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                              const AttentionContext& ctx, int64_t layer);
// The two paths that take q unscaled: SDPA and the fused kernel apply `scale` to q k^T themselves
// (before the bias), which spares a pass over q and one over its gradient.
torch::Tensor sdpaAttention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                            const AttentionContext& ctx, double scale, double dropout);
// Context extension (context_extension.h): q (B, H, T, D) scaled, k, v (B, KV, T, D), q and k not
// yet rotated; returns (B, H, T, D). Query blocks (ctx.queryBlock rows at most, as the block path),
// each against only the key ranges it sees (the keys between a sink block and a window are never
// computed); logn scales the queries; pairs in the near region get the true rotation and bias,
// the others those of the method's far positions (the rotation of q and k at them, the provider's
// atPositions); invisible and future keys -inf; float32 logits and softmax as attendKeys. Probes
// receive each block's probabilities over keys [0, q1), zero where a key is not seen.
torch::Tensor extendedAttention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                const AttentionContext& ctx, int64_t layer);
torch::Tensor fusedLinearBiasPath(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                  const AttentionContext& ctx, double scale, double dropout);

struct AttentionImpl : torch::nn::Module {
  // Layer `layerIndex` of a model of config `c`: its heads, key/value heads, head dimension,
  // projection biases, q/k norms, window and clip (MPT's clip_qkv: q, k, v clamped to [-clip, clip]).
  AttentionImpl(const ModelConfig& c, int64_t layerIndex);
  torch::Tensor forward(const torch::Tensor& x, const AttentionContext& ctx);  // (B,T,C) -> (B,T,C)

  int64_t heads, kvHeads, headDim, layerIndex, window;
  double dropout, scale;  // scale: of q.k (1/sqrt(D) unless the config sets it)
  std::optional<double> clip;
  torch::nn::Linear qkv{nullptr}, out{nullptr};  // qkv: ((H + 2 KV) D, C) rows q | k | v; out: (C, H D)
  Norm qNorm{nullptr}, kNorm{nullptr};           // per head, over D (ModelConfig::qkNorm)
};
TORCH_MODULE(Attention);

}  // namespace xtrap
