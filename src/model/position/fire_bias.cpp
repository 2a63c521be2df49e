#include "model/position/fire_bias.h"

#include "util/execution_context.h"

namespace xtrap {

FireBias::FireBias(int64_t heads, double initialThreshold) {
  // LibTorch's default Linear initialisation, as the paper's PyTorch nn.Linear.
  hidden_ = register_module("mlp_hidden", torch::nn::Linear(1, kWidth));
  out_ = register_module("mlp_out", torch::nn::Linear(kWidth, heads));
  c_ = register_parameter("c", torch::full({1}, kInitialC));
  thresholdMultiplier_ = register_parameter("threshold_multiplier", torch::ones({1}));
  thresholdInit_ = register_buffer("threshold_init", torch::full({1}, initialThreshold));
}

torch::Tensor FireBias::threshold() const { return (thresholdMultiplier_ * thresholdInit_).abs(); }

torch::Tensor FireBias::block(int64_t q0, int64_t q1, int64_t k0, int64_t k1) {
  auto floats = c_.options();  // the parameters' device and precision
  return atPositions(torch::arange(q0, q1, floats), torch::arange(k0, k1, floats));
}

torch::Tensor FireBias::atPositions(const torch::Tensor& queryPositions, const torch::Tensor& keyPositions) {
  auto floats = c_.options();
  auto i = queryPositions.to(floats).unsqueeze(1);  // (Tq, 1)
  auto j = keyPositions.to(floats).unsqueeze(0);    // (1, Tk)
  auto cAbs = c_.abs();
  auto psi = [&](const torch::Tensor& x) { return torch::log1p(cAbs * x); };
  auto normaliser = psi(torch::maximum(i, threshold())) + kEpsilon;  // (Tq, 1)
  auto u = psi((i - j).abs()) / normaliser;                          // (Tq, Tk)
  // The bias is added to float32 logits: the MLP must not run in the autocast precision.
  AutocastScope float32(c_.device(), torch::kFloat32);
  auto h = torch::relu(hidden_(u.unsqueeze(-1)));  // (Tq, Tk, W)
  return out_(h).permute({2, 0, 1});               // (H, Tq, Tk)
}

}  // namespace xtrap
