#pragma once
// FIRE (Li et al. 2023, "Functional Interpolation for Relative Positions Improves Long Context
// Transformers"): for query i and key j the bias of every head is one learned function of the
// log-transformed distance, progressively interpolated by the query's position:
//   b(i, j) = f(psi(|i - j|) / psi(max(Lthr, i))),   psi(x) = log(|c| x + 1),
// f an MLP 1 -> W (ReLU) -> H whose H outputs are the heads' biases, c learned (init 0.1) and the
// threshold Lthr = |multiplier * Lthr0| learned through its multiplier (init 1) around a fixed
// Lthr0 (L_train here). Learning the multiplier instead of Lthr itself lets the optimizer move the
// threshold by relative steps: AdamW's steps of ~lr would not move a threshold of hundreds.
// For i < Lthr the argument of f is psi(distance) / psi(Lthr), for longer contexts the distances
// are squeezed into the [0, 1] range f was trained on: that is FIRE's progressive interpolation.
// Encoders use the same |i - j| for keys after the query (the paper defines the causal case only).
#include "model/position/attention_bias.h"

namespace xtrap {

struct FireBias : AttentionBias {
  static constexpr int64_t kWidth = 32;     // the MLP's hidden width (the paper's)
  static constexpr double kInitialC = 0.1;  // the paper's initial c
  static constexpr double kEpsilon = 1e-6;  // keeps psi(max(Lthr, i)) > 0 if c reaches 0

  FireBias(int64_t heads, double initialThreshold);

  torch::Tensor block(int64_t q0, int64_t q1, int64_t k0, int64_t k1) override;
  // At re-assigned positions (context extension) the query's own position also sets the
  // normaliser: a far pair is seen as the pair of its far query and key positions.
  torch::Tensor atPositions(const torch::Tensor& queryPositions, const torch::Tensor& keyPositions) override;
  bool trainable() const override { return true; }

  torch::Tensor c() const { return c_; }  // (1)
  torch::Tensor threshold() const;        // (1): |multiplier * Lthr0|

 private:
  torch::nn::Linear hidden_{nullptr};  // (W, 1) weight, (W) bias
  torch::nn::Linear out_{nullptr};     // (H, W) weight, (H) bias
  torch::Tensor c_;                    // (1)
  torch::Tensor thresholdMultiplier_;  // (1), learned
  torch::Tensor thresholdInit_;        // (1), fixed: Lthr0
};

}  // namespace xtrap
