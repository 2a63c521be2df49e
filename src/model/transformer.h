#pragma once
// The xtrap transformer: pre-LN blocks (or sandwich, or BERT's post-LN) over token embeddings,
// one position method, one output head. Decoders are causal LMs; encoders are bidirectional (masked LM).
// Device and precision: place() moves the parameters and sets the compute precision; features()
// and tokenNll() take batches from anywhere and move them to the parameters (input()), and run
// under one autocast scope of that precision (parameters stay float32). Every tensor made inside
// follows an input or a parameter.
// B = batch, T = sequence length, C = d_model, V = vocabulary, N = rows scored.
#include <torch/torch.h>

#include <memory>
#include <optional>

#include "model/activation_dropout.h"
#include "model/adaptive_input.h"
#include "model/add_norm.h"
#include "model/attention.h"
#include "model/attention_plan.h"
#include "model/model_config.h"
#include "model/norm.h"
#include "model/output_head.h"
#include "model/position/linear_bias.h"
#include "util/execution_context.h"

namespace xtrap {

struct TransformerBlockImpl : torch::nn::Module {
  TransformerBlockImpl(const ModelConfig& c, int64_t index);
  // The residual stream x (B,T,C) float32 with ln1(x), -> the new residual with next(it): each
  // residual add is one addNorm with the norm after it (the block's ln2, then `next`: the next
  // block's ln1, or ln_final where nextIsFinal, whose output stays float32 for the heads; empty for
  // none, the normed part then undefined). `fused`: the CUDA elementwise kernels where they apply
  // (TransformerImpl::setFusedElementwise).
  AddNormed forward(const AddNormed& in, const AttentionContext& ctx, const Norm& next, bool nextIsFinal, bool fused);
  // The feed-forward branch on its normed input (B,T,C) -> (B,T,C): fc2(act(fc1 x)), or gated:
  // fc2(act(gate) * up) with fc1's rows [gate | up].
  torch::Tensor mlp(const torch::Tensor& x, bool fused);

  Norm ln1{nullptr}, ln2{nullptr};
  Norm attnOutNorm{nullptr}, mlpOutNorm{nullptr};  // sandwich blocks: on each branch's output
  Attention attn{nullptr};
  torch::nn::Linear fc1{nullptr}, fc2{nullptr};  // fc1: (F, C), gated (2F, C); fc2: (C, F)
  double dropout, activationDropoutRate;
  Activation activation;  // ModelConfig::activation, parsed once
  bool gated;
  bool post;  // post-norm (BERT): ln1 and ln2 after the residual adds, `next` not applied
};
TORCH_MODULE(TransformerBlock);

struct ForwardOptions {
  int64_t queryBlock = 0;                 // > 0 and < T: block attention path (O(T) memory)
  AttentionObserver* observer = nullptr;  // probes
  std::optional<AttentionPath> path;      // force one attention path (tests, benchmarks); else planned
};

struct TransformerImpl : torch::nn::Module {
  explicit TransformerImpl(ModelConfig config);

  // Moves the parameters to ctx.device and computes in ctx.dtype from now on.
  void place(const ExecutionContext& ctx);
  torch::Device device() const { return firstNormWeight_.device(); }
  torch::ScalarType computeDtype() const { return computeDtype_; }
  // A batch tensor on the parameters' device (the one place batches move).
  torch::Tensor input(const torch::Tensor& t) const { return toDevice(t, device()); }

  // (B,T) token ids anywhere -> (B,T,C) features on device(), in the compute precision or float32.
  // With a cache (decoders, incremental decoding): the tokens are positions cache->length ..
  // cache->length + T - 1 after the cached ones, which they attend to; the cache grows by T.
  torch::Tensor features(const torch::Tensor& tokens, const ForwardOptions& opt = {}, KvCache* cache = nullptr);
  torch::Tensor logits(const torch::Tensor& x);                                  // (N,C) -> (N,V)
  torch::Tensor tokenNll(const torch::Tensor& x, const torch::Tensor& targets);  // (N) float32
  // The attention path features() takes for a window of T tokens.
  AttentionPath attentionPath(int64_t T, const ForwardOptions& opt) const;

  // After every optimizer step: constrained position parameters back into their domain.
  void constrainParameters();
  std::vector<torch::Tensor> sparseGradientParameters() const;  // those whose gradients are sparse tensors

  LinearBias* linearBias() const;  // ALiBi family, else nullptr
  BiasKind biasKind() const;
  AttentionBias* attentionBias() const { return bias_.get(); }
  Rotary* rotary() { return rotary_ ? &*rotary_ : nullptr; }
  // Sliding-window layers' own rotation (ModelConfig::rotaryLocalBase), else nullptr.
  Rotary* windowedRotary() { return windowedRotary_ ? &*windowedRotary_ : nullptr; }
  // Training-free context extension for the next forwards (evaluation, probes); an inactive one
  // switches it off. Throws std::invalid_argument, one line, where the method has no meaning for
  // this model: encoders, sliding-window layers, and re-assigned positions for a position method
  // that cannot take them (only rotary and the ALiBi family can; none takes sinks and lambda).
  void setContextExtension(const ContextExtension& extension);
  const ContextExtension& contextExtension() const { return extension_; }
  // Call after changing slopes or rotary settings (interpolation): drops the cached full bias.
  void clearBiasCache() { cachedBias_ = cachedWindowedBias_ = torch::Tensor(); }
  // Whether the residual adds with their LayerNorms, the FFN activation with its dropout, and the
  // embedding's scale, positions and dropout run as the fused CUDA kernels where they apply (on a
  // GPU of a build with the kernels; default on), or as LibTorch's operators (the before/after of a
  // profile: `train --unfused-elementwise`). Nothing changes on the CPU.
  void setFusedElementwise(bool on) { fusedElementwise_ = on; }

  ModelConfig config;
  torch::nn::Embedding tokenEmbedding{nullptr};     // (V, C); none with adaptive input; sparse gradient when untied
  torch::nn::LayerNorm embeddingNorm{nullptr};      // config.embeddingNorm: on the token embeddings
  AdaptiveInput adaptiveInput{nullptr};             // config.adaptiveInput: tied to head->adaptive
  torch::nn::Embedding positionEmbedding{nullptr};  // learned: (maxPositions, C)
  torch::nn::Embedding typeEmbedding{nullptr};      // config.tokenTypes: (types, C), row 0 added (BERT's)
  torch::nn::ModuleList blocks{nullptr};
  Norm lnFinal{nullptr};  // none when !config.finalNorm
  OutputHead head{nullptr};

 private:
  // The (H|1, T, T) bias with the causal mask, and with the sliding window's when window > 0.
  torch::Tensor fullBias(int64_t T, const torch::TensorOptions& options, int64_t window = 0);
  // Whether some layer's sliding window masks keys of a window of T tokens.
  bool windowed(int64_t T) const { return config.attentionWindow > 0 && config.attentionWindow < T; }

  // Settings parsed once from the config (not compared as strings on every forward).
  PositionMethod pos_;
  OutputHeadKind headKind_;
  bool causal_;
  torch::ScalarType computeDtype_ = torch::kFloat32;
  bool fusedElementwise_ = true;
  std::shared_ptr<AttentionBias> bias_;
  std::optional<Rotary> rotary_, windowedRotary_;
  ContextExtension extension_;
  bool extensionPathNoted_ = false;   // the note that the fused kernel does not compute it, once
  torch::Tensor cachedBias_;          // full bias for the last T and device when it has no trainable parameters
  torch::Tensor cachedWindowedBias_;  // the same with the sliding window
  torch::Tensor firstNormWeight_;  // a parameter every model has (moved and loaded in place): its device is the model's
  torch::Tensor sinusoidal_;       // (T_max, C) table on the parameters' device, grown on demand
};
TORCH_MODULE(Transformer);

}  // namespace xtrap
