#include "model/attention.h"

#include <torch/version.h>

#include <cmath>
#include <limits>

#include "model/fast_dropout.h"

// LibTorch >= 2.3 has a fused CPU attention kernel that takes an additive mask and never holds
// the T x T probabilities. It has no dropout (with dropout it falls back to the unfused math),
// so it serves inference only. LibTorch 1.13's _scaled_dot_product_attention is that unfused
// math on CPU, so there the paths below are used.
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 3)
#define XTRAP_FUSED_CPU_ATTENTION 1
#endif

namespace xtrap {
using torch::indexing::Slice;

torch::Tensor attentionBiasBlock(AttentionBias* bias, bool causal, int64_t q0, int64_t q1, int64_t k0, int64_t k1) {
  torch::Tensor b;
  if (bias) b = bias->block(q0, q1, k0, k1);
  if (causal && k1 - 1 > q0) {  // some key lies after some query
    auto i = torch::arange(q0, q1).unsqueeze(1);
    auto j = torch::arange(k0, k1).unsqueeze(0);
    auto mask = torch::zeros({q1 - q0, k1 - k0}).masked_fill(j > i, -std::numeric_limits<float>::infinity());
    b = b.defined() ? b + mask : mask.unsqueeze(0);
  }
  return b;
}

int64_t attentionBlockRows(int64_t T, int64_t queryBlock) {
  constexpr int64_t kBlockElements = int64_t(1) << 20;
  return std::min(queryBlock, std::max<int64_t>(32, kBlockElements / std::max<int64_t>(T, 1)));
}

int64_t causalSkipBlock(int64_t T) {
  // 8 blocks compute 9/16 of the square; more blocks save little and cost per-op overhead.
  constexpr int64_t kBlocks = 8, kMinRows = 32;
  return T >= kBlocks * kMinRows ? (T + kBlocks - 1) / kBlocks : 0;
}

AttentionImpl::AttentionImpl(int64_t dModel, int64_t heads, double dropout, int64_t layerIndex)
    : heads(heads), layerIndex(layerIndex), dropout(dropout) {
  qkv = register_module("qkv", torch::nn::Linear(dModel, 3 * dModel));
  out = register_module("out", torch::nn::Linear(dModel, dModel));
}

torch::Tensor AttentionImpl::forward(const torch::Tensor& x, const AttentionContext& ctx) {
  int64_t B = x.size(0), T = x.size(1), C = x.size(2), H = heads, D = C / H;
  auto qkvHeads = qkv(x).view({B, T, 3, H, D}).permute({2, 0, 3, 1, 4});  // (3, B, H, T, D)
  auto q = qkvHeads[0], k = qkvHeads[1], v = qkvHeads[2];                 // (B, H, T, D)
  if (ctx.rotary) {
    q = ctx.rotary->apply(q);
    k = ctx.rotary->apply(k);
  }
  // Scale queries, not logits: the position bias is added unscaled (Press et al.).
  q = q * (1.0 / std::sqrt(static_cast<double>(D)));
  double p = is_training() ? dropout : 0.0;

  auto attend = [&](const torch::Tensor& qBlock, int64_t q0, int64_t keys, const torch::Tensor& bias) {
    auto kBlock = k.narrow(2, 0, keys), vBlock = v.narrow(2, 0, keys);
    auto scores = qBlock.matmul(kBlock.transpose(-2, -1));  // (B, H, Tq, Tk)
    if (bias.defined()) scores.add_(bias);                  // in place: matmul backward does not need its output
    auto probs = torch::softmax(scores, -1);
    if (ctx.observer) ctx.observer->onProbabilities(layerIndex, q0, probs);
    probs = fastDropout(probs, p, p > 0);
    return probs.matmul(vBlock);  // (B, H, Tq, D)
  };

  int64_t rows = attentionBlockRows(T, ctx.queryBlock);
  torch::Tensor y;
  if (ctx.queryBlock <= 0 || ctx.queryBlock >= T) {
    int64_t block = causalSkipBlock(T);
#ifdef XTRAP_FUSED_CPU_ATTENTION
    if (!ctx.observer && p == 0) {
      auto mask = ctx.fullBias.defined() ? c10::optional<torch::Tensor>(ctx.fullBias) : c10::nullopt;
      y = at::scaled_dot_product_attention(q, k, v, mask, 0.0, false, 1.0);  // q is already scaled
    } else
#endif
        if (!ctx.causal || ctx.observer || block == 0) {
      y = attend(q, 0, T, ctx.fullBias);
    } else {
      // Causal: query rows [q0, q1) only attend to keys [0, q1), so the (masked) upper-right
      // blocks of the T x T logits are never computed: about half the matmul, softmax and
      // dropout work, with the same values as the one-piece product. Observers (probes) get the
      // one-piece path above.
      std::vector<torch::Tensor> blocks;
      for (int64_t q0 = 0; q0 < T; q0 += block) {
        int64_t q1 = std::min(T, q0 + block);
        // Contiguous: a broadcast add_ from a strided (H, Tq, Tk) slice was ~3x slower than the add itself.
        auto bias =
            ctx.fullBias.defined() ? ctx.fullBias.narrow(-2, q0, q1 - q0).narrow(-1, 0, q1).contiguous() : ctx.fullBias;
        blocks.push_back(attend(q.narrow(2, q0, q1 - q0), q0, q1, bias));
      }
      y = torch::cat(blocks, 2);
    }
  } else {
    std::vector<torch::Tensor> blocks;
    for (int64_t q0 = 0; q0 < T; q0 += rows) {
      int64_t q1 = std::min(T, q0 + rows);
      int64_t keys = ctx.causal ? q1 : T;  // causal queries never see later keys
      auto bias = attentionBiasBlock(ctx.bias, ctx.causal, q0, q1, 0, keys);
      blocks.push_back(attend(q.narrow(2, q0, q1 - q0), q0, keys, bias));
    }
    y = torch::cat(blocks, 2);
  }
  y = y.transpose(1, 2).reshape({B, T, C});
  return out(y);
}

}  // namespace xtrap
