#pragma once
// The ALiBi family's attention bias, computed from a LinearBiasSpec (see linear_bias_spec.h).
// Learned variants hold the slopes as parameters p with slope = sigmoid(p).
#include "model/linear_bias_spec.h"
#include "model/position/attention_bias.h"

namespace xtrap {

struct LinearBias : AttentionBias {
  // `learnedInitRandom`: alibi-learned's default p ~ N(-2, 1) instead of the standard slopes.
  LinearBias(LinearBiasSpec spec, bool learnedInitRandom);

  torch::Tensor block(int64_t q0, int64_t q1, int64_t k0, int64_t k1) override;
  torch::Tensor atPositions(const torch::Tensor& queryPositions, const torch::Tensor& keyPositions) override;
  bool trainable() const override { return spec_.learnedSlopes || spec_.hasFirstTokenBias; }
  bool blocksFuture() const override;

  // Slopes in use now (H), after any interpolation factor.
  torch::Tensor slopePast() const;
  torch::Tensor slopeFuture() const;
  torch::Tensor firstTokenBias() const override { return firstTokenBias_; }  // (H) or undefined
  const LinearBiasSpec& spec() const { return spec_; }

  // Inference-time interpolation: past slopes are divided by past[h], future slopes by
  // future[h] (1 = unchanged).
  void setSlopeDivisors(const std::vector<double>& past, const std::vector<double>& future);

 private:
  // A per-head constant on the parameters' device: moved there the first time it is used after
  // the model moved. They are neither parameters nor buffers, which would change the checkpoint
  // and safetensors keys, so Module::to() does not move them.
  const torch::Tensor& onParameterDevice(torch::Tensor& constant) const;

  LinearBiasSpec spec_;
  torch::Tensor pastParam_, futureParam_;                // (H): learned logits or fixed slopes
  mutable torch::Tensor pastDivisors_, futureDivisors_;  // (H) interpolation divisors
  mutable torch::Tensor blockPast_, blockFuture_;        // (H) bool
  torch::Tensor firstTokenBias_;                         // (H)
};

}  // namespace xtrap
