#pragma once
// Rotary position embedding (Su et al.), rotate-half form, applied to queries and keys.
// A pretrained checkpoint's own rotation (rope_scaling.h, as transformers computes it): only the
// first rotaryDim channels of a head turn (partial rotary; the rest pass through), by the
// frequencies of its rope_scaling for the window's length (offset + T: dynamic and longrope
// change with it), and cos and sin are multiplied by its attention factor.
// Inference-time tricks analogous to ALiBi interpolation, on top of that (model/interpolation.h
// computes them and says which compose with which rope_scaling): positionScale (positions / a), an
// NTK-aware base (base * a^(d/(d-2))) and YaRN's per-pair frequency factors and attention factor.
// xtrap's own models: rotaryDim 0 (every channel) and the default scaling.
#include <torch/torch.h>

#include <functional>
#include <optional>
#include <utility>
#include <vector>

#include "model/position/rope_scaling.h"

namespace xtrap {

struct Rotary {
  int64_t headDim = 0;
  double base = 10000.0;
  double positionScale = 1.0;            // positions are divided by this
  std::vector<double> frequencyFactors;  // (d/2) multipliers of the pairs' frequencies; empty = all 1
  double attentionFactor = 1.0;          // the rotated channels of q and k are multiplied by this
  int64_t rotaryDim = 0;                 // d: the channels rotated, the first of each head; 0 = headDim
  RopeScaling scaling;                   // the checkpoint's own frequencies and attention factor

  // A rotation of the first rotaryDim channels of heads of headDim (xtrap's own: rotaryDim = headDim,
  // the default scaling); throws std::invalid_argument, one line, for settings it cannot take.
  static Rotary make(int64_t headDim, int64_t rotaryDim, double base, RopeScaling scaling);
  int64_t rotated() const { return rotaryDim > 0 ? rotaryDim : headDim; }

  // x: (B, H, T, D) with absolute positions 0..T-1 starting at `offset`.
  torch::Tensor apply(const torch::Tensor& x, int64_t offset = 0) const;
  // x: (B, H, T, D) turned by the angles of `positions` (T, any real values: context extension's
  // re-assigned positions, context_extension.h), with the frequencies of a window of
  // windowLength tokens (dynamic and longrope frequencies follow it).
  torch::Tensor applyAt(const torch::Tensor& x, const torch::Tensor& positions, int64_t windowLength) const;

  // The (T, d/2) cos and sin of the angles (float32, float64 for a float64 x), times the
  // checkpoint's attention factor, and what they were computed from. Not a setting: apply keeps
  // the last ones, since q and k of every layer and every step of a run take the same (a dozen
  // small operators each time on a GPU otherwise).
  struct Tables {
    int64_t T = 0, d = 0, offset = 0;
    double base = 0, positionScale = 0;
    std::vector<double> frequencyFactors;
    RopeScaling scaling;
    torch::Device device = torch::kCPU;
    torch::ScalarType dtype = torch::kFloat32;
    torch::Tensor cos, sin;  // (T, d/2)
  };
  mutable std::optional<Tables> tableCache;

 private:
  // x: (B, H, T, d), the rotated channels.
  torch::Tensor rotate(const torch::Tensor& x, int64_t offset) const;
  // The (T, d/2) cos and sin of `positions` (T) in dtype, for a window of windowLength tokens.
  std::pair<torch::Tensor, torch::Tensor> cosSin(const torch::Tensor& positions, int64_t windowLength,
                                                 torch::ScalarType dtype) const;
  // x (B, H, T, d) turned by (T, d/2) cos and sin, computed in `compute`, returned in x's precision.
  torch::Tensor rotateBy(const torch::Tensor& x, const torch::Tensor& cosHalf, const torch::Tensor& sinHalf,
                         torch::ScalarType compute) const;
  // turn() on the rotated channels of x (B, H, T, D), the rest passed through.
  torch::Tensor withPassThrough(const torch::Tensor& x,
                                const std::function<torch::Tensor(const torch::Tensor&)>& turn) const;
  const Tables& tables(int64_t T, int64_t offset, torch::Device device, torch::ScalarType dtype) const;
};

}  // namespace xtrap
