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
                                 const torch::TensorOptions& options) {
  torch::Tensor b;
  if (bias) b = bias->block(q0, q1, k0, k1);
  // Some key lies after some query, and the provider does not already give it -inf.
  if (causal && k1 - 1 > q0 && !(bias && bias->blocksFuture())) {
    auto floats = options.dtype(torch::kFloat32);
    auto i = torch::arange(q0, q1, floats).unsqueeze(1);
    auto j = torch::arange(k0, k1, floats).unsqueeze(0);
    auto mask = torch::zeros({q1 - q0, k1 - k0}, floats).masked_fill(j > i, -std::numeric_limits<float>::infinity());
    b = b.defined() ? b + mask : mask.unsqueeze(0);
  }
  return b;
}

namespace {

// Queries qBlock (B, H, Tq, D) starting at row q0 against keys [0, keys): float32 logits plus the
// bias (H|1, Tq, keys), float32 softmax, dropout, then the values in the compute precision.
torch::Tensor attendKeys(const torch::Tensor& qBlock, int64_t q0, const torch::Tensor& k, const torch::Tensor& v,
                         int64_t keys, const torch::Tensor& bias, double dropout, AttentionObserver* observer,
                         int64_t layer) {
  auto kBlock = k.narrow(2, 0, keys), vBlock = v.narrow(2, 0, keys);
  auto scores = qBlock.matmul(kBlock.transpose(-2, -1)).to(torch::kFloat32);  // (B, H, Tq, Tk)
  if (bias.defined()) scores.add_(bias);  // in place: matmul backward does not need its output
  auto probs = torch::softmax(scores, -1);
  if (observer) observer->onProbabilities(layer, q0, probs);
  return dropoutMatmul(probs, vBlock, dropout, dropout > 0);  // (B, H, Tq, D)
}

}  // namespace

torch::Tensor referenceAttention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                 const AttentionContext& ctx, double dropout, int64_t layer) {
  return attendKeys(q, 0, k, v, k.size(2), ctx.fullBias, dropout, ctx.observer, layer);
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
    blocks.push_back(attendKeys(q.narrow(2, q0, q1 - q0), q0, k, v, q1, bias, dropout, ctx.observer, layer));
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
    auto bias = attentionBiasBlock(ctx.bias, ctx.causal, q0, q1, 0, keys, q.options());
    blocks.push_back(attendKeys(q.narrow(2, q0, q1 - q0), q0, k, v, keys, bias, dropout, ctx.observer, layer));
  }
  return torch::cat(blocks, 2);
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

AttentionImpl::AttentionImpl(int64_t dModel, int64_t heads, double dropout, int64_t layerIndex, bool bias,
                             std::optional<double> clip)
    : heads(heads), layerIndex(layerIndex), dropout(dropout), clip(clip) {
  qkv = register_module("qkv", torch::nn::Linear(torch::nn::LinearOptions(dModel, 3 * dModel).bias(bias)));
  out = register_module("out", torch::nn::Linear(torch::nn::LinearOptions(dModel, dModel).bias(bias)));
}

torch::Tensor AttentionImpl::forward(const torch::Tensor& x, const AttentionContext& ctx) {
  int64_t B = x.size(0), T = x.size(1), C = x.size(2), H = heads, D = C / H;
  // torch::linear (at::linear), not Linear::forward, whose C++ version adds a 3-D input's bias in a
  // separate pass over the output; at::linear folds it into the GEMM (cuBLASLt's bias epilogue on
  // CUDA), as PyTorch's nn.Linear does. unbind, not three selects: its backward is one stack, where
  // each select's is a zero-filled (3, B, H, T, D) gradient and two sums of them.
  auto packed = torch::linear(x, qkv->weight, qkv->bias);  // (B, T, 3C)
  if (clip) packed = packed.clamp(-*clip, *clip);
  auto qkvHeads = packed.view({B, T, 3, H, D}).permute({2, 0, 3, 1, 4}).unbind(0);
  auto q = qkvHeads[0], k = qkvHeads[1], v = qkvHeads[2];  // (B, H, T, D)
  if (ctx.rotary) {
    q = ctx.rotary->apply(q);
    k = ctx.rotary->apply(k);
  }
  // Scale queries, not logits: the position bias is added unscaled (Press et al.). SDPA and the
  // fused kernel scale their float32 logits themselves, before the bias.
  double scale = 1.0 / std::sqrt(static_cast<double>(D)), p = is_training() ? dropout : 0.0;
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
    case AttentionPath::Recompute:
      // A requested query block sets the blocks' rows (tests force the path with small ones).
      y = recomputedAttention(q, k, v, ctx.fullBias, ctx.causal, p,
                              ctx.queryBlock > 0 ? ctx.queryBlock : recomputeBlockRows(B * H, T));
      break;
    case AttentionPath::FusedLinearBias:
      y = fusedLinearBiasPath(q, k, v, ctx, scale, p);
      break;
  }
  y = y.transpose(1, 2).reshape({B, T, C});
  return torch::linear(y, out->weight, out->bias);
}

}  // namespace xtrap
