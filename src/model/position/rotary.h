#pragma once
// Rotary position embedding (Su et al.), rotate-half form, applied to queries and keys.
// Inference-time tricks analogous to ALiBi interpolation: positionScale (positions / a) and an
// NTK-aware base (base * a^(D/(D-2))).
#include <torch/torch.h>

namespace xtrap {

struct Rotary {
  int64_t headDim = 0;
  double base = 10000.0;
  double positionScale = 1.0;  // positions are divided by this

  // x: (B, H, T, D) with absolute positions 0..T-1 starting at `offset`.
  torch::Tensor apply(const torch::Tensor& x, int64_t offset = 0) const;
};

}  // namespace xtrap
