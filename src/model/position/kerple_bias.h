#pragma once
// KERPLE's logarithmic kernel (Chi et al. 2022): for head h, query i and key j the bias is
//   -r1[h] * log(1 + r2[h] * |i - j|),   r1, r2 > 0 learned per head,
// the same symmetric function of distance in decoders (where the causal mask hides j > i) and
// encoders. The paper keeps r1, r2 positive by projection (clamping to >= kMinimum after every
// update) rather than by a reparameterisation; constrainParameters() is that projection.
#include "model/position/attention_bias.h"

namespace xtrap {

struct KerpleLogBias : AttentionBias {
  static constexpr double kMinimum = 1e-2;  // the projection's floor for r1 and r2 (the paper's code)

  // r1 ~ U(0, 2), r2 ~ U(0, 1) per head (the paper's initialisation), then projected.
  explicit KerpleLogBias(int64_t heads);

  torch::Tensor block(int64_t q0, int64_t q1, int64_t k0, int64_t k1) override;
  torch::Tensor atPositions(const torch::Tensor& queryPositions, const torch::Tensor& keyPositions) override;
  bool trainable() const override { return true; }
  void constrainParameters() override;

  torch::Tensor r1() const { return r1_; }  // (H)
  torch::Tensor r2() const { return r2_; }  // (H)

 private:
  torch::Tensor r1_, r2_;  // (H) each
};

}  // namespace xtrap
