#include "model/attention.h"

#include <cmath>
#include <limits>

#include "model/fast_dropout.h"
#include "model/position/linear_bias.h"
#include "model/recomputed_attention.h"
#include "util/execution_context.h"
#include "util/torch_compat.h"

#ifdef XTRAP_WITH_CUDA_KERNELS
#include "model/position/linear_bias_attention_cuda.h"
#endif

namespace xtrap {

torch::Tensor attentionBiasBlock(AttentionBias* bias, bool causal, int64_t q0, int64_t q1, int64_t k0, int64_t k1,
                                 const torch::TensorOptions& options, int64_t window) {
  torch::Tensor b;
  if (bias) b = bias->block(q0, q1, k0, k1);
  // Some key lies after some query, and the provider does not already give it -inf; or some key
  // lies a window or more before some query.
  bool future = causal && k1 - 1 > q0 && !(bias && bias->blocksFuture());
  bool outside = window > 0 && k0 <= q1 - 1 - window;
  if (future || outside) {
    auto floats = options.dtype(torch::kFloat32);
    auto i = torch::arange(q0, q1, floats).unsqueeze(1);
    auto j = torch::arange(k0, k1, floats).unsqueeze(0);
    auto masked = future ? j > i : torch::zeros({q1 - q0, k1 - k0}, floats.dtype(torch::kBool));
    if (outside) masked = masked | (j <= i - double(window));
    auto mask = torch::zeros({q1 - q0, k1 - k0}, floats).masked_fill(masked, -std::numeric_limits<float>::infinity());
    b = b.defined() ? b + mask : mask.unsqueeze(0);
  }
  return b;
}

namespace {

// The float32 logits of query heads q (B, H, Tq, D) against key heads k (B, KV, Tk, D): a group's
// G = H / KV query heads are the rows of one product with their key head. (B, H, Tq, Tk).
torch::Tensor groupedLogits(const torch::Tensor& q, const torch::Tensor& k) {
  int64_t B = q.size(0), H = q.size(1), Tq = q.size(2), D = q.size(3), KV = k.size(1), G = H / KV;
  auto rows = G == 1 ? q : q.reshape({B, KV, G * Tq, D});
  return rows.matmul(k.transpose(-2, -1)).to(torch::kFloat32).view({B, H, Tq, k.size(2)});
}

// probs (B, H, Tq, Tk) times values v (B, KV, Tk, D), grouped as groupedLogits: (B, H, Tq, D).
torch::Tensor groupedValues(const torch::Tensor& probs, const torch::Tensor& v) {
  int64_t B = probs.size(0), H = probs.size(1), Tq = probs.size(2), Tk = probs.size(3), KV = v.size(1), G = H / KV;
  auto p = probs.to(v.scalar_type());
  if (G == 1) return p.matmul(v);
  return p.view({B, KV, G * Tq, Tk}).matmul(v).view({B, H, Tq, v.size(3)});
}

// Queries qBlock (B, H, Tq, D) starting at row q0 against keys [k0, k1) of k, v (B, KV, T, D):
// float32 logits, soft-capped, plus the bias (H|1, Tq, k1 - k0), float32 softmax, dropout, then
// the values in the compute precision. A group's G = H / KV query heads are the rows of one
// product with their key/value head: (B, KV, G Tq, D) x (B, KV, D, Tk).
torch::Tensor attendKeys(const torch::Tensor& qBlock, int64_t q0, const torch::Tensor& k, const torch::Tensor& v,
                         int64_t k0, int64_t k1, const torch::Tensor& bias, double softcap, double dropout,
                         AttentionObserver* observer, int64_t layer) {
  int64_t B = qBlock.size(0), H = qBlock.size(1), Tq = qBlock.size(2), D = qBlock.size(3);
  int64_t KV = k.size(1), G = H / KV, Tk = k1 - k0;
  auto kBlock = k.narrow(2, k0, Tk), vBlock = v.narrow(2, k0, Tk);
  auto scores = groupedLogits(qBlock, kBlock);                        // (B, H, Tq, Tk)
  if (softcap > 0) scores = torch::tanh(scores / softcap) * softcap;  // Gemma 2's, before the mask
  if (bias.defined()) scores.add_(bias);  // in place: matmul backward does not need its output
  auto probs = torch::softmax(scores, -1);
  if (observer) observer->onProbabilities(layer, q0, probs);
  if (G == 1) return dropoutMatmul(probs, vBlock, dropout, dropout > 0);  // (B, H, Tq, D)
  return dropoutMatmul(probs.view({B, KV, G * Tq, Tk}), vBlock, dropout, dropout > 0).view({B, H, Tq, D});
}

}  // namespace

torch::Tensor referenceAttention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                 const AttentionContext& ctx, double dropout, int64_t layer) {
  return attendKeys(q, 0, k, v, 0, k.size(2), ctx.fullBias, ctx.softcap, dropout, ctx.observer, layer);
}

torch::Tensor causalSkipAttention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                  const AttentionContext& ctx, double dropout, int64_t layer) {
  // Query rows [q0, q1) only attend to keys [0, q1), so the (masked) upper-right blocks of the
  // T x T logits are never computed: about half the matmul, softmax and dropout work, with the
  // same values as the one-piece product.
  int64_t T = q.size(2), block = causalSkipBlock(T);
  if (block == 0) return referenceAttention(q, k, v, ctx, dropout, layer);
  std::vector<torch::Tensor> blocks;
  for (int64_t q0 = 0; q0 < T; q0 += block) {
    int64_t q1 = std::min(T, q0 + block);
    // Contiguous: a broadcast add_ from a strided (H, Tq, Tk) slice was ~3x slower than the add itself.
    auto bias =
        ctx.fullBias.defined() ? ctx.fullBias.narrow(-2, q0, q1 - q0).narrow(-1, 0, q1).contiguous() : ctx.fullBias;
    blocks.push_back(
        attendKeys(q.narrow(2, q0, q1 - q0), q0, k, v, 0, q1, bias, ctx.softcap, dropout, ctx.observer, layer));
  }
  return torch::cat(blocks, 2);
}

torch::Tensor blockAttention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                             const AttentionContext& ctx, double dropout, int64_t layer) {
  int64_t T = q.size(2), rows = attentionBlockRows(T, ctx.queryBlock > 0 ? ctx.queryBlock : T);
  std::vector<torch::Tensor> blocks;
  for (int64_t q0 = 0; q0 < T; q0 += rows) {
    int64_t q1 = std::min(T, q0 + rows);
    int64_t keys = ctx.causal ? q1 : T;  // causal queries never see later keys
    // Keys a window or more before the block's first query are masked for all its rows: skipped
    // (but for probes, which receive every key's probability).
    int64_t first = ctx.window > 0 && !ctx.observer ? std::max<int64_t>(0, q0 - ctx.window + 1) : 0;
    auto bias = attentionBiasBlock(ctx.bias, ctx.causal, q0, q1, first, keys, q.options(), ctx.window);
    blocks.push_back(
        attendKeys(q.narrow(2, q0, q1 - q0), q0, k, v, first, keys, bias, ctx.softcap, dropout, ctx.observer, layer));
  }
  return torch::cat(blocks, 2);
}

torch::Tensor cachedAttention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                              const AttentionContext& ctx, int64_t layer) {
  int64_t Tk = k.size(2), q0 = Tk - q.size(2);
  int64_t first = ctx.window > 0 ? std::max<int64_t>(0, q0 - ctx.window + 1) : 0;  // keys no query sees: skipped
  auto bias = attentionBiasBlock(ctx.bias, ctx.causal, q0, Tk, first, Tk, q.options(), ctx.window);
  return attendKeys(q, q0, k, v, first, Tk, bias, ctx.softcap, 0.0, nullptr, layer);
}

torch::Tensor sdpaAttention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                            const AttentionContext& ctx, double scale, double dropout) {
#ifdef XTRAP_HAS_SDPA
  // No bias provider: the causal flag lets SDPA pick its causal kernels. Otherwise the full bias
  // (causal -inf included) is an additive mask. SDPA's kernels take it in the query's precision,
  // so a bias stays float32 by running SDPA in float32: the plan sends reduced-precision forwards
  // with a bias elsewhere (attention_plan.h); only a forced path gets here with bf16 q.
  if (!ctx.fullBias.defined()) return at::scaled_dot_product_attention(q, k, v, {}, dropout, ctx.causal, scale);
  AutocastScope float32(q.device(), torch::kFloat32);  // autocast would cast the mask back to bf16
  auto f32 = [](const torch::Tensor& t) { return t.to(torch::kFloat32); };
  return at::scaled_dot_product_attention(f32(q), f32(k), f32(v), ctx.fullBias, dropout, false, scale)
      .to(v.scalar_type());
#else
  (void)q, (void)k, (void)v, (void)ctx, (void)scale, (void)dropout;
  TORCH_CHECK(false, "the sdpa attention path needs LibTorch 2.1 or newer");
#endif
}

namespace {

// A host vector of doubles as a float64 tensor on `device`.
torch::Tensor doublesOn(const std::vector<double>& values, torch::Device device) {
  return torch::tensor(values, torch::TensorOptions().dtype(torch::kFloat64)).to(device);
}

}  // namespace

torch::Tensor extendedAttention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                const AttentionContext& ctx, int64_t layer) {
  const ContextExtension& ext = *ctx.extension;
  const int64_t T = q.size(2);
  const torch::Device device = q.device();
  const auto n = static_cast<size_t>(T);
  std::vector<double> scales(n, 1.0), farQuery(n), farKey(n);
  for (int64_t i = 0; i < T; ++i) {
    // logn's n: the keys query i sees, i + 1 in a decoder, the whole window in an encoder.
    scales[size_t(i)] = ext.queryScale(ctx.causal ? i : T - 1);
    farQuery[size_t(i)] = ext.farQueryPosition(i);
    farKey[size_t(i)] = ext.farKeyPosition(i);
  }
  auto qs = ext.logn ? q * doublesOn(scales, device).to(q.scalar_type()).view({1, 1, T, 1}) : q;
  auto truePositions = torch::arange(T, torch::TensorOptions().dtype(torch::kFloat64).device(device));
  auto farQueryPositions = doublesOn(farQuery, device), farKeyPositions = doublesOn(farKey, device);
  // Without a rotation or a bias the far pairs' logits are the true ones (NoPE's sinks, lambda).
  const bool far = ext.hasFarPositions() && (ctx.rotary || ctx.bias);
  // An encoder's future pairs (j > i) take the mirror image of the past ones: the query at the
  // far position a key would have and the key at a far query's, so that their distance j' - i'
  // is the past rule's at j - i.
  const bool farFuture = far && !ctx.causal;
  // The rotations at the true positions, and at the far ones where the method has them.
  auto qNear = ctx.rotary ? ctx.rotary->apply(qs) : qs, kNear = ctx.rotary ? ctx.rotary->apply(k) : k;
  torch::Tensor qFar, kFar, qFarFuture, kFarFuture;
  if (far && ctx.rotary) {
    qFar = ctx.rotary->applyAt(qs, farQueryPositions, T);
    kFar = ctx.rotary->applyAt(k, farKeyPositions, T);
  }
  if (farFuture && ctx.rotary) {
    qFarFuture = ctx.rotary->applyAt(qs, farKeyPositions, T);
    kFarFuture = ctx.rotary->applyAt(k, farQueryPositions, T);
  }
  // A learned bias of the first token replaces its distance term (BiALiBi): pairs with token 0
  // keep it whatever their distance.
  const torch::Tensor firstTokenBias = ctx.bias ? ctx.bias->firstTokenBias() : torch::Tensor();
  const bool firstTokenKept = firstTokenBias.defined();
  auto floats = torch::TensorOptions().dtype(torch::kFloat32).device(device);
  const float minusInf = -std::numeric_limits<float>::infinity();
  int64_t rows = attentionBlockRows(T, ctx.queryBlock > 0 ? ctx.queryBlock : T);
  std::vector<torch::Tensor> blocks;
  for (int64_t q0 = 0; q0 < T; q0 += rows) {
    int64_t q1 = std::min(T, q0 + rows), Tq = q1 - q0;
    // The keys this block sees: one range, or the sinks and the recent keys.
    auto ranges = ctx.causal ? ext.keyRanges(q0, q1) : std::vector<std::pair<int64_t, int64_t>>{{0, T}};
    std::vector<torch::Tensor> pieces;
    for (auto [a, b] : ranges)
      if (b > a) pieces.push_back(torch::arange(a, b, torch::TensorOptions().dtype(torch::kLong).device(device)));
    auto keyIndex = torch::cat(pieces);  // (Tk)
    auto keysOf = [&](const torch::Tensor& t) {
      return ranges.size() == 1 ? t.narrow(2, ranges[0].first, ranges[0].second - ranges[0].first)
                                : t.index_select(2, keyIndex);
    };
    auto i = torch::arange(q0, q1, floats).unsqueeze(1), j = keyIndex.to(torch::kFloat32).unsqueeze(0);
    // The block's q.k products with q, k rotated as qr, kr (soft-capped), and the bias of its
    // queries at positions qPos against its keys at kPos.
    auto productOf = [&](const torch::Tensor& qr, const torch::Tensor& kr) {
      auto l = groupedLogits(qr.narrow(2, q0, Tq), keysOf(kr));  // (B, H, Tq, Tk)
      return ctx.softcap > 0 ? torch::tanh(l / ctx.softcap) * ctx.softcap : l;
    };
    auto logitsAt = [&](const torch::Tensor& product, const torch::Tensor& qPos, const torch::Tensor& kPos) {
      return ctx.bias ? product + ctx.bias->atPositions(qPos.narrow(0, q0, Tq), kPos.index_select(0, keyIndex))
                      : product;
    };
    auto nearProduct = productOf(qNear, kNear);
    auto logits = logitsAt(nearProduct, truePositions, truePositions);
    if (firstTokenKept)  // (1, H, 1, 1) in place of the distance term of pairs with token 0
      logits = torch::where((i == 0) | (j == 0), nearProduct + firstTokenBias.to(torch::kFloat32).view({1, -1, 1, 1}),
                            logits);
    // Without a rotation the far pairs' products are the true ones; only their bias moves.
    auto farPairsOf = [&](const torch::Tensor& distance) {  // (Tq, Tk)
      auto pairs = distance >= double(ext.nearDistance());
      return firstTokenKept ? pairs & (i != 0) & (j != 0) : pairs;
    };
    if (far) {
      auto product = ctx.rotary ? productOf(qFar, kFar) : nearProduct;
      logits = torch::where(farPairsOf(i - j), logitsAt(product, farQueryPositions, farKeyPositions), logits);
    }
    if (farFuture) {
      auto product = ctx.rotary ? productOf(qFarFuture, kFarFuture) : nearProduct;
      logits = torch::where(farPairsOf(j - i), logitsAt(product, farKeyPositions, farQueryPositions), logits);
    }
    if (ctx.causal) {
      auto hidden = j > i;  // and the keys past the recent ones that are not sinks
      if (ext.recentDistance() > 0)
        hidden = hidden | ((j >= double(ext.sinkTokens)) & ((i - j) >= double(ext.recentDistance())));
      logits = logits.masked_fill(hidden, minusInf);
    }
    auto probs = torch::softmax(logits, -1);
    if (ctx.observer) {
      auto all = torch::zeros({probs.size(0), probs.size(1), Tq, ctx.causal ? q1 : T}, probs.options());
      ctx.observer->onProbabilities(layer, q0, all.index_copy(3, keyIndex, probs));
    }
    blocks.push_back(groupedValues(probs, keysOf(v)));
  }
  return torch::cat(blocks, 2);
}

torch::Tensor fusedLinearBiasPath(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                  const AttentionContext& ctx, double scale, double dropout) {
  auto* bias = dynamic_cast<LinearBias*>(ctx.bias);
  TORCH_CHECK(bias, "the fused-linear-bias attention path is for the ALiBi family only");
#ifdef XTRAP_WITH_CUDA_KERNELS
  return fusedLinearBiasAttention(q, k, v, *bias, ctx.causal, scale, dropout);
#else
  (void)q, (void)k, (void)v, (void)scale, (void)dropout;
  TORCH_CHECK(false, "the fused-linear-bias attention path needs a build with CUDA kernels and a CUDA LibTorch");
#endif
}

AttentionImpl::AttentionImpl(const ModelConfig& c, int64_t layerIndex)
    : heads(c.heads),
      kvHeads(c.resolvedKvHeads()),
      headDim(c.resolvedHeadDim()),
      layerIndex(layerIndex),
      window(c.layerWindow(layerIndex)),
      dropout(c.attentionDropoutRate()),
      scale(c.queryScale.value_or(1.0 / std::sqrt(double(c.resolvedHeadDim())))),
      clip(c.clipQkv) {
  int64_t C = c.dModel, H = heads, KV = kvHeads, D = headDim;
  qkv = register_module("qkv",
                        torch::nn::Linear(torch::nn::LinearOptions(C, (H + 2 * KV) * D).bias(c.resolvedQkvBias())));
  out = register_module("out", torch::nn::Linear(torch::nn::LinearOptions(H * D, C).bias(c.linearBiases)));
  if (c.qkNorm) {
    qNorm = register_module("q_norm", Norm(parseNormKind(c.norm), D, c.normEps));
    kNorm = register_module("k_norm", Norm(parseNormKind(c.norm), D, c.normEps));
  }
}

torch::Tensor AttentionImpl::forward(const torch::Tensor& x, const AttentionContext& shared) {
  int64_t B = x.size(0), T = x.size(1), H = heads, KV = kvHeads, D = headDim;
  AttentionContext ctx = shared;  // this layer's window, its full bias and rotation
  if (window > 0) {
    ctx.window = window;
    ctx.fullBias = shared.windowedFullBias;
    if (shared.windowedRotary) ctx.rotary = shared.windowedRotary;
  }
  // torch::linear (at::linear), not Linear::forward, whose C++ version adds a 3-D input's bias in a
  // separate pass over the output; at::linear folds it into the GEMM (cuBLASLt's bias epilogue on
  // CUDA), as PyTorch's nn.Linear does.
  auto packed = torch::linear(x, qkv->weight, qkv->bias);  // (B, T, (H + 2 KV) D)
  if (clip) packed = packed.clamp(-*clip, *clip);
  torch::Tensor q, k, v;
  if (KV == H) {
    // unbind, not three selects: its backward is one stack, where each select's is a zero-filled
    // (3, B, H, T, D) gradient and two sums of them.
    auto qkvHeads = packed.view({B, T, 3, H, D}).permute({2, 0, 3, 1, 4}).unbind(0);
    q = qkvHeads[0], k = qkvHeads[1], v = qkvHeads[2];  // (B, H, T, D)
  } else {
    auto parts = packed.split({H * D, KV * D, KV * D}, 2);
    q = parts[0].view({B, T, H, D}).transpose(1, 2);   // (B, H, T, D)
    k = parts[1].view({B, T, KV, D}).transpose(1, 2);  // (B, KV, T, D)
    v = parts[2].view({B, T, KV, D}).transpose(1, 2);
  }
  if (qNorm) {
    q = qNorm(q);
    k = kNorm(k);
  }
  if (ctx.extension) {
    if (ctx.cache) throw std::invalid_argument("context extension: no generation with a KV cache (--score teacher)");
    auto y = extendedAttention(q * scale, k, v, ctx, layerIndex);  // (B, H, T, D)
    return torch::linear(y.transpose(1, 2).reshape({B, T, H * D}), out->weight, out->bias);
  }
  int64_t offset = ctx.cache ? ctx.cache->length : 0;  // the new tokens' first position
  if (ctx.rotary) {
    q = ctx.rotary->apply(q, offset);
    k = ctx.rotary->apply(k, offset);
  }
  if (ctx.cache) {
    auto layer = size_t(layerIndex);
    if (ctx.cache->keys.size() <= layer) ctx.cache->keys.resize(layer + 1), ctx.cache->values.resize(layer + 1);
    torch::Tensor& keys = ctx.cache->keys[layer];
    torch::Tensor& values = ctx.cache->values[layer];
    keys = keys.defined() ? torch::cat({keys, k}, 2) : k.contiguous();  // (B, KV, offset + T, D)
    values = values.defined() ? torch::cat({values, v}, 2) : v.contiguous();
    auto y = cachedAttention(q * scale, keys, values, ctx, layerIndex);  // (B, H, T, D)
    return torch::linear(y.transpose(1, 2).reshape({B, T, H * D}), out->weight, out->bias);
  }
  // Scale queries, not logits: the position bias is added unscaled (Press et al.). SDPA and the
  // fused kernel scale their float32 logits themselves, before the bias.
  double p = is_training() ? dropout : 0.0;
  if (ctx.path != AttentionPath::FusedLinearBias && ctx.path != AttentionPath::Sdpa) q = q * scale;
  torch::Tensor y;  // (B, H, T, D)
  switch (ctx.path) {
    case AttentionPath::Reference:
      y = referenceAttention(q, k, v, ctx, p, layerIndex);
      break;
    case AttentionPath::CausalSkip:
      y = causalSkipAttention(q, k, v, ctx, p, layerIndex);
      break;
    case AttentionPath::Block:
      y = blockAttention(q, k, v, ctx, p, layerIndex);
      break;
    case AttentionPath::Sdpa:
      y = sdpaAttention(q, k, v, ctx, scale, p);
      break;
    case AttentionPath::Recompute: {
      TORCH_CHECK(KV == H && ctx.softcap == 0,
                  "the recompute attention path has no grouped key/value heads and no soft-cap (attention_plan.h)");
      // Each query block's bias from the provider (causal mask and window included), in the
      // forward pass and again in the backward pass: no (H, T, T) bias is ever held.
      auto blockBias = [bias = ctx.bias, causal = ctx.causal, window = ctx.window, options = q.options()](
                           int64_t q0, int64_t q1, int64_t keys) {
        return attentionBiasBlock(bias, causal, q0, q1, 0, keys, options, window);
      };
      // A requested query block sets the blocks' rows (tests force the path with small ones).
      y = recomputedAttention(q, k, v, blockBias, ctx.bias ? ctx.bias->parameters() : std::vector<torch::Tensor>{},
                              ctx.causal, p, ctx.queryBlock > 0 ? ctx.queryBlock : recomputeBlockRows(B * H, T));
      break;
    }
    case AttentionPath::FusedLinearBias:
      y = fusedLinearBiasPath(q, k, v, ctx, scale, p);
      break;
  }
  y = y.transpose(1, 2).reshape({B, T, H * D});
  return torch::linear(y, out->weight, out->bias);
}

}  // namespace xtrap
