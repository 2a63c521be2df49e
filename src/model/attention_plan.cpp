#include "model/attention_plan.h"

#include <algorithm>

namespace xtrap {

AttentionPath chooseAttentionPath(const AttentionPlanInput& in) {
  bool blocked = in.queryBlock > 0 && in.queryBlock < in.length;
  // Probes need the probabilities, which only xtrap's own paths expose.
  if (in.probing) return blocked ? AttentionPath::Block : AttentionPath::Reference;
  if (in.groupedKv || in.softcap) {
    if (blocked) return AttentionPath::Block;
    return in.causal && causalSkipBlock(in.length) > 0 ? AttentionPath::CausalSkip : AttentionPath::Reference;
  }
  // The ALiBi family on the GPU: the fused kernel, for training and evaluation alike. It holds
  // no T x T tensor, so it keeps any requested memory bound.
  if (in.cuda && in.bias == BiasKind::Linear && in.fusedLinearBias) return AttentionPath::FusedLinearBias;
  // SDPA: on the GPU always (its kernels take the mask and dropout); on the CPU only the fused
  // kernel beats xtrap's paths, and it has no dropout. A bias goes to it only in float32: its
  // kernels take the mask in the query's precision, and bfloat16 would round a KERPLE bias of -48
  // to a multiple of 0.25.
  bool sdpa = in.hasSdpa && (in.cuda || (in.hasFusedCpuSdpa && !in.dropout)) &&
              (in.bias == BiasKind::None || !in.reducedPrecision);
  // A requested query block is a memory bound. Only the block path keeps it when there is a
  // bias (SDPA would take it as a T x T mask); without one SDPA's fused kernels hold no T x T
  // tensor either.
  if (blocked) return sdpa && in.bias == BiasKind::None ? AttentionPath::Sdpa : AttentionPath::Block;
  if (sdpa) return AttentionPath::Sdpa;
  // Training on the CPU: the (B, H, T, T) probabilities autograd would keep until the backward
  // pass are most of a training step's memory; recomputing them costs less than they weigh.
  if (!in.cuda && in.backward) return AttentionPath::Recompute;
  if (!in.cuda && in.causal && causalSkipBlock(in.length) > 0) return AttentionPath::CausalSkip;
  return AttentionPath::Reference;
}

std::string attentionPathName(AttentionPath path) {
  switch (path) {
    case AttentionPath::Reference:
      return "reference";
    case AttentionPath::CausalSkip:
      return "causal-skip";
    case AttentionPath::Block:
      return "block";
    case AttentionPath::Sdpa:
      return "sdpa";
    case AttentionPath::Recompute:
      return "recompute";
    case AttentionPath::FusedLinearBias:
      return "fused-linear-bias";
  }
  return "?";
}

bool pathUsesFullBias(AttentionPath path, BiasKind bias) {
  // Training at 4L..16L must not hold an (H, T, T) bias: the recompute path, as the block path,
  // computes each query block's bias (and causal mask) from the provider.
  if (path == AttentionPath::Block || path == AttentionPath::Recompute || path == AttentionPath::FusedLinearBias)
    return false;
  // SDPA takes causality as a flag: it needs the full tensor only for a bias provider's values.
  if (path == AttentionPath::Sdpa) return bias != BiasKind::None;
  return true;  // the causal mask, when there is no bias
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

int64_t recomputeBlockRows(int64_t batchHeads, int64_t T) {
  constexpr int64_t kBlockElements = int64_t(1) << 21, kMinRows = 32;
  int64_t rows = kBlockElements / std::max<int64_t>(batchHeads * T, 1);
  return std::min(std::max<int64_t>(T, 1), std::max(kMinRows, rows));
}

}  // namespace xtrap
