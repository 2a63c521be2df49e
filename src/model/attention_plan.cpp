#include "model/attention_plan.h"

#include <algorithm>

namespace xtrap {

AttentionPath chooseAttentionPath(const AttentionPlanInput& in) {
  bool blocked = in.queryBlock > 0 && in.queryBlock < in.length;
  // Probes need the probabilities, which only xtrap's own paths expose; a requested query block
  // is a memory bound that only the Block path keeps.
  if (blocked) return AttentionPath::Block;
  if (in.probing) return AttentionPath::Reference;
  // SDPA: on the GPU always (its kernels take the mask and dropout); on the CPU only the fused
  // kernel beats xtrap's paths, and it has no dropout.
  if (in.hasSdpa && (in.cuda || (in.hasFusedCpuSdpa && !in.dropout))) return AttentionPath::Sdpa;
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
  }
  return "?";
}

bool pathUsesFullBias(AttentionPath path) { return path != AttentionPath::Block; }

int64_t attentionBlockRows(int64_t T, int64_t queryBlock) {
  constexpr int64_t kBlockElements = int64_t(1) << 20;
  return std::min(queryBlock, std::max<int64_t>(32, kBlockElements / std::max<int64_t>(T, 1)));
}

int64_t causalSkipBlock(int64_t T) {
  // 8 blocks compute 9/16 of the square; more blocks save little and cost per-op overhead.
  constexpr int64_t kBlocks = 8, kMinRows = 32;
  return T >= kBlocks * kMinRows ? (T + kBlocks - 1) / kBlocks : 0;
}

}  // namespace xtrap
