#include "model/transformer.h"

#include <cmath>
#include <cstdio>
#include <stdexcept>

#include "model/embedding_dropout.h"
#include "model/interpolation.h"
#include "model/position/fire_bias.h"
#include "model/position/kerple_bias.h"
#include "model/position/sinusoidal.h"
#include "model/position/t5_bias.h"
#include "util/torch_compat.h"

#ifdef XTRAP_WITH_CUDA_KERNELS
#include "model/position/linear_bias_attention_cuda.h"
#endif

namespace xtrap {

namespace {
// A sliding window that masks keys of a window (ModelConfig::attentionWindow < T) is a mask the
// attention computes per block, as it does a table bias: what the path plan and the full bias see.
BiasKind plannedBiasKind(BiasKind bias, bool windowed) {
  return bias == BiasKind::None && windowed ? BiasKind::Table : bias;
}

Activation parseActivation(const std::string& name) {
  return name == "relu"        ? Activation::Relu
         : name == "gelu-tanh" ? Activation::GeluTanh
         : name == "silu"      ? Activation::Silu
                               : Activation::Gelu;
}
}  // namespace

TransformerBlockImpl::TransformerBlockImpl(const ModelConfig& c, int64_t index)
    : dropout(c.dropout),
      activationDropoutRate(c.activationDropoutRate()),
      activation(parseActivation(c.activation)),
      gated(c.gatedMlp),
      post(c.blockNorms == "post") {
  NormKind norm = parseNormKind(c.norm);
  ln1 = register_module("ln1", Norm(norm, c.dModel, c.normEps));
  attn = register_module("attn", Attention(c, index));
  ln2 = register_module("ln2", Norm(norm, c.dModel, c.normEps));
  if (c.blockNorms == "sandwich") {
    attnOutNorm = register_module("attn_out_norm", Norm(norm, c.dModel, c.normEps));
    mlpOutNorm = register_module("mlp_out_norm", Norm(norm, c.dModel, c.normEps));
  }
  int64_t F = c.ffn;
  fc1 = register_module(
      "fc1", torch::nn::Linear(torch::nn::LinearOptions(c.dModel, gated ? 2 * F : F).bias(c.resolvedFc1Bias())));
  fc2 = register_module("fc2", torch::nn::Linear(torch::nn::LinearOptions(F, c.dModel).bias(c.linearBiases)));
}

torch::Tensor TransformerBlockImpl::mlp(const torch::Tensor& x, bool fused) {
  bool train = is_training();
  // torch::linear folds the bias into the GEMM (see Attention::forward).
  auto h = torch::linear(x, fc1->weight, fc1->bias);  // (B, T, F), gated (B, T, 2F)
  torch::Tensor hidden;                               // (B, T, F)
  if (gated) {
    // dropout(act(gate)) * up is dropout(act(gate) * up): the same mask scales the same product.
    auto parts = h.chunk(2, -1);
    hidden = activationDropout(parts[0], activation, activationDropoutRate, train, fused) * parts[1];
  } else {
    hidden = activationDropout(h, activation, activationDropoutRate, train, fused);
  }
  return torch::linear(hidden, fc2->weight, fc2->bias);
}

AddNormed TransformerBlockImpl::forward(const AddNormed& in, const AttentionContext& ctx, const Norm& next,
                                        bool nextIsFinal, bool fused) {
  bool train = is_training();
  if (post) {
    // The stream is already normed (in.out); each residual add ends in this block's own norm,
    // whose output is the new stream, float32 (not only a matmul's input).
    auto mid = addNorm(in.out, attn(in.out, ctx), ln1, dropout, train, fused, false);
    auto out = addNorm(mid.normed, mlp(mid.normed, fused), ln2, dropout, train, fused, false);
    return {out.normed, out.normed};
  }
  auto a = attn(in.normed, ctx);
  if (attnOutNorm) a = attnOutNorm(a);
  auto mid = addNorm(in.out, a, ln2, dropout, train, fused, true);
  auto m = mlp(mid.normed, fused);
  if (mlpOutNorm) m = mlpOutNorm(m);
  return addNorm(mid.out, m, next, dropout, train, fused, !nextIsFinal);
}

TransformerImpl::TransformerImpl(ModelConfig c)
    : config(std::move(c)), pos_(config.position()), headKind_(config.headKind()), causal_(config.causal()) {
  config.validate();
  torch::manual_seed(config.initSeed);
  int64_t C = config.dModel;
  PositionMethod pos = pos_;
  if (!config.adaptiveInput) {
    // Untied (the output head is an adaptive softmax with its own weights), the embedding's
    // gradient has a row per token of the step: sparse, not a dense (V, C) tensor that is zero
    // almost everywhere (131 MiB for a WikiText-103 vocabulary at C = 128). Tied, the head's
    // dense gradient adds to it anyway.
    bool sparse = config.headKind() == OutputHeadKind::Lm && !config.adaptiveSoftmaxCutoffs.empty();
    tokenEmbedding = register_module(
        "token_embedding", torch::nn::Embedding(torch::nn::EmbeddingOptions(config.vocabSize, C).sparse(sparse)));
    torch::nn::init::normal_(tokenEmbedding->weight, 0.0, 1.0 / std::sqrt(double(C)));
  }
  if (config.embeddingNorm)
    embeddingNorm =
        register_module("embedding_norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({C}).eps(config.normEps)));
  if (config.tokenTypes > 0) {
    typeEmbedding = register_module("type_embedding", torch::nn::Embedding(config.tokenTypes, C));
    torch::nn::init::normal_(typeEmbedding->weight, 0.0, 1.0 / std::sqrt(double(C)));
  }
  if (pos == PositionMethod::Learned) {
    positionEmbedding = register_module("position_embedding", torch::nn::Embedding(config.positionTableSize(), C));
    torch::nn::init::normal_(positionEmbedding->weight, 0.0, 1.0 / std::sqrt(double(C)));
  }
  if (isLinearBias(pos)) {
    LinearBiasSpec spec = makeLinearBiasSpec(pos, config.heads, config.causal());
    if (config.alibiSlopes == "mpt") spec.slopePast = mptAlibiSlopes(config.heads, config.alibiBiasMax);
    if (config.alibiInterp != "none") {
      // An adapted run's slopes are the interpolated ones (eval's --interp composes on top).
      SlopeDivisors d = directionalSlopeDivisors(parseInterp(config.alibiInterp), config.alibiInterpFactor,
                                                 spec.slopePast, spec.slopeFuture, spec.blockPast, spec.blockFuture);
      for (size_t h = 0; h < spec.slopePast.size(); ++h) spec.slopePast[h] /= d.past[h];
      for (size_t h = 0; h < spec.slopeFuture.size(); ++h) spec.slopeFuture[h] /= d.future[h];
    }
    bias_ = std::make_shared<LinearBias>(std::move(spec), config.resolvedAlibiInit() == "random");
    register_module("linear_bias", bias_);
  } else if (pos == PositionMethod::T5) {
    bias_ = std::make_shared<T5Bias>(config.heads, config.t5Buckets, config.t5MaxDistance, !config.causal());
    register_module("t5_bias", bias_);
  } else if (pos == PositionMethod::KerpleLog) {
    bias_ = std::make_shared<KerpleLogBias>(config.heads);
    register_module("kerple_bias", bias_);
  } else if (pos == PositionMethod::Fire) {
    bias_ = std::make_shared<FireBias>(config.heads, static_cast<double>(config.contextLength));
    register_module("fire_bias", bias_);
  } else if (pos == PositionMethod::Rotary) {
    const int64_t D = config.resolvedHeadDim(), d = config.rotaryDim();
    rotary_ = Rotary::make(D, d, config.rotaryBase, config.ropeScaling);
    // Gemma 3's windowed layers: their own base, never scaled (nor interpolated: --interp sets rotary_).
    if (config.rotaryLocalBase > 0) windowedRotary_ = Rotary::make(D, d, config.rotaryLocalBase, RopeScaling{});
  }
  blocks = register_module("blocks", torch::nn::ModuleList());
  for (int64_t l = 0; l < config.layers; ++l) blocks->push_back(TransformerBlock(config, l));
  firstNormWeight_ = blocks[0]->as<TransformerBlock>()->ln1->weight;
  if (config.finalNorm) lnFinal = register_module("ln_final", Norm(parseNormKind(config.norm), C, config.normEps));
  head = register_module("head", OutputHead(config, tokenEmbedding ? tokenEmbedding->weight : torch::Tensor()));
  if (config.adaptiveInput) {
    adaptiveInput = register_module("adaptive_input", AdaptiveInput(C, head->adaptive));
    adaptiveInput->initialise();
  }
}

LinearBias* TransformerImpl::linearBias() const { return dynamic_cast<LinearBias*>(bias_.get()); }

BiasKind TransformerImpl::biasKind() const {
  return !bias_ ? BiasKind::None : linearBias() ? BiasKind::Linear : BiasKind::Table;
}

void TransformerImpl::constrainParameters() {
  if (bias_) bias_->constrainParameters();
}

std::vector<torch::Tensor> TransformerImpl::sparseGradientParameters() const {
  if (tokenEmbedding && tokenEmbedding->options.sparse()) return {tokenEmbedding->weight};
  return {};
}

void TransformerImpl::place(const ExecutionContext& ctx) {
  to(ctx.device);
  computeDtype_ = ctx.dtype;
  clearBiasCache();
}

torch::Tensor TransformerImpl::fullBias(int64_t T, const torch::TensorOptions& options, int64_t window) {
  bool cacheable = !bias_ || !bias_->trainable();
  torch::Tensor& cached = window > 0 ? cachedWindowedBias_ : cachedBias_;
  if (cacheable && cached.defined() && cached.size(-1) == T && cached.device() == options.device()) return cached;
  auto b = attentionBiasBlock(bias_.get(), causal_, 0, T, 0, T, options, window);
  if (cacheable) cached = b;
  return b;
}

AttentionPath TransformerImpl::attentionPath(int64_t T, const ForwardOptions& opt) const {
  if (opt.path) return *opt.path;
  AttentionPlanInput plan;
  plan.cuda = device().is_cuda();
  plan.length = T;
  plan.queryBlock = opt.queryBlock;
  plan.dropout = is_training() && config.attentionDropoutRate() > 0;
  plan.backward = is_training() && torch::GradMode::is_enabled();
  plan.probing = opt.observer != nullptr;
  plan.causal = causal_;
  plan.bias = plannedBiasKind(biasKind(), windowed(T));
  plan.hasSdpa = compat::kHasSdpa;
  plan.hasFusedCpuSdpa = compat::kHasFusedCpuSdpa;
  plan.reducedPrecision = computeDtype_ != torch::kFloat32;
  plan.groupedKv = config.resolvedKvHeads() != config.heads;
  plan.softcap = config.attentionSoftcap > 0;
#ifdef XTRAP_WITH_CUDA_KERNELS
  // The kernel takes bf16 q, k, v: the compute precision autocast gives the projections.
  plan.fusedLinearBias =
      computeDtype_ == torch::kBFloat16 && fusedLinearBiasAttentionTakes(config.heads, config.dModel / config.heads,
                                                                         config.attentionDropoutRate(), device());
#endif
  return chooseAttentionPath(plan);
}

torch::Tensor TransformerImpl::logits(const torch::Tensor& x) {
  AutocastScope autocast(device(), computeDtype_);
  return head->logits(x);
}

torch::Tensor TransformerImpl::tokenNll(const torch::Tensor& x, const torch::Tensor& targets) {
  AutocastScope autocast(device(), computeDtype_);
  return head->nll(x, input(targets));
}

torch::Tensor TransformerImpl::features(const torch::Tensor& tokensIn, const ForwardOptions& opt, KvCache* cache) {
  if (cache && !causal_) throw std::invalid_argument("incremental decoding (a KV cache) is for decoders");
  auto tokens = input(tokensIn);  // (B, T)
  AutocastScope autocast(device(), computeDtype_);
  int64_t T = tokens.size(1), C = config.dModel;
  int64_t offset = cache ? cache->length : 0;  // the first token's position
  // (B, T, C) token embeddings; CLAP embeds with the same normalised vectors it projects onto.
  // The residual stream is float32 whatever the embedding is held in (bf16 for a pretrained
  // model evaluated in bf16: run/pretrained_weights.h); the float32 LayerNorms take it as it is
  // (LibTorch 1.13's CPU autocast does not cast their input).
  auto x = (adaptiveInput                       ? adaptiveInput(tokens)
            : headKind_ == OutputHeadKind::Clap ? torch::embedding(head->projection(), tokens)
                                                : tokenEmbedding(tokens))
               .to(torch::kFloat32);
  // Scaled before the embedding norm where there is one, else in the fused pass with the positions.
  // Gemma multiplies by sqrt(C) held in the model's precision (55.4256 is 55.5 in bfloat16).
  double scale = config.scaleEmbedding ? std::sqrt(double(C)) : 1.0;
  if (config.embeddingScaleRounded) scale = torch::tensor(scale, torch::kFloat64).to(computeDtype_).item<double>();
  torch::Tensor positions;  // (T, C), or none
  if (pos_ == PositionMethod::Learned) {
    int64_t first = config.positionOffset + offset;  // the table row of the first token
    if (first + T > config.positionTableSize())
      throw std::invalid_argument("learned positions: length " + std::to_string(offset + T) + " exceeds the table of " +
                                  std::to_string(config.positionTableSize() - config.positionOffset) +
                                  " positions (train with --max-positions to extrapolate)");
    positions = positionEmbedding(torch::arange(first, first + T, tokens.options()));
  } else if (pos_ == PositionMethod::Sinusoidal) {
    if (!sinusoidal_.defined() || sinusoidal_.size(0) < offset + T || sinusoidal_.device() != x.device())
      sinusoidal_ = sinusoidalTable(offset + T, C, x.options());
    positions = sinusoidal_.narrow(0, offset, T);
  }
  if (embeddingNorm) {
    // The norm of the whole embedding: the scaled token's, BERT's type-0 row and the position's.
    if (scale != 1.0) x = x * scale;
    if (typeEmbedding) x = x + typeEmbedding->weight[0].to(torch::kFloat32);
    if (positions.defined()) x = x + positions.to(torch::kFloat32);
    x = embeddingDropout(embeddingNorm(x), 1.0, {}, config.dropout, is_training(), fusedElementwise_);
  } else {
    x = embeddingDropout(x, scale, positions, config.dropout, is_training(), fusedElementwise_);
  }

  AttentionContext ctx;
  // A cache, and context extension, have their own attention.
  if (extension_.active() && !cache && !extensionPathNoted_ &&
      attentionPath(T, opt) == AttentionPath::FusedLinearBias) {
    std::fprintf(stderr, "note: --extend %s runs on xtrap's blocked attention; the fused kernel does not compute it\n",
                 extension_.label().c_str());
    extensionPathNoted_ = true;
  }
  ctx.path = cache || extension_.active() ? AttentionPath::Block : attentionPath(T, opt);
  ctx.extension = extension_.active() ? &extension_ : nullptr;
  ctx.cache = cache;

  ctx.causal = causal_;
  ctx.bias = bias_.get();
  ctx.rotary = rotary_ ? &*rotary_ : nullptr;
  ctx.queryBlock = opt.queryBlock;
  ctx.observer = opt.observer;
  ctx.softcap = config.attentionSoftcap;
  ctx.windowedRotary = windowedRotary_ ? &*windowedRotary_ : nullptr;
  if (!cache && pathUsesFullBias(ctx.path, plannedBiasKind(biasKind(), windowed(T)))) {
    // An empty windowed-layer list means every layer is windowed: no layer reads the plain bias.
    if (!windowed(T) || !config.windowedLayers.empty()) ctx.fullBias = fullBias(T, x.options());
    if (windowed(T)) ctx.windowedFullBias = fullBias(T, x.options(), config.attentionWindow);
  }
  // The residual stream with the norm of what comes next: each block's residual adds end in the
  // norm after them (ln2, the next block's ln1, ln_final), one fused pass each on a GPU.
  const size_t L = blocks->size();
  // Post-norm blocks take the stream as it is; pre-norm ones its norm.
  AddNormed stream{x, config.blockNorms == "post" ? x : blocks[0]->as<TransformerBlock>()->ln1(x)};
  for (size_t l = 0; l < L; ++l) {
    const bool last = l + 1 == L;
    const auto& next = last ? lnFinal : blocks[l + 1]->as<TransformerBlock>()->ln1;
    stream = blocks[l]->as<TransformerBlock>()->forward(stream, ctx, next, last, fusedElementwise_);
  }
  if (cache) cache->length += T;
  return lnFinal ? stream.normed : stream.out;
}

void TransformerImpl::setContextExtension(const ContextExtension& extension) {
  checkExtensionApplies(extension, pos_, causal_, config.attentionWindow > 0);
  extension_ = extension;
}

}  // namespace xtrap
