#pragma once
// Rotary position embedding (Su et al.), rotate-half form, applied to queries and keys.
// Inference-time tricks analogous to ALiBi interpolation: positionScale (positions / a), an
// NTK-aware base (base * a^(D/(D-2))) and YaRN's per-pair frequency factors and attention factor
// (eval/interpolation.h computes them).
#include <torch/torch.h>

#include <optional>
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

  // The (T, D/2) cos and sin of the angles (float32, float64 for a float64 x) and what they were
  // computed from. Not a setting: apply keeps the last ones, since q and k of every layer and
  // every step of a run take the same (a dozen small operators each time on a GPU otherwise).
  struct Tables {
    int64_t T = 0, D = 0, offset = 0;
    double base = 0, positionScale = 0;
    std::vector<double> frequencyFactors;
    torch::Device device = torch::kCPU;
    torch::ScalarType dtype = torch::kFloat32;
    torch::Tensor cos, sin;  // (T, D/2)
  };
  mutable std::optional<Tables> tableCache;

 private:
  const Tables& tables(int64_t T, int64_t D, int64_t offset, torch::Device device, torch::ScalarType dtype) const;
};

}  // namespace xtrap
