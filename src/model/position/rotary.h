#pragma once
// Rotary position embedding (Su et al.), rotate-half form, applied to queries and keys.
// Inference-time tricks analogous to ALiBi interpolation: positionScale (positions / a), an
// NTK-aware base (base * a^(D/(D-2))) and YaRN's per-pair frequency factors and attention factor
// (eval/interpolation.h computes them).
#include <torch/torch.h>

#include <vector>

namespace xtrap {

struct Rotary {
  int64_t headDim = 0;
  double base = 10000.0;
  double positionScale = 1.0;            // positions are divided by this
  std::vector<double> frequencyFactors;  // (D/2) multipliers of the pairs' frequencies; empty = all 1
  double attentionFactor = 1.0;          // the rotated q and k are multiplied by this

  // x: (B, H, T, D) with absolute positions 0..T-1 starting at `offset`.
  torch::Tensor apply(const torch::Tensor& x, int64_t offset = 0) const;
};

}  // namespace xtrap
