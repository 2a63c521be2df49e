#pragma once
// One forward and backward of a model for the GPU test programs (gpu_checks,
// fused_elementwise_checks): the loss is the mean NLL of the targets plus the mean square of the
// features (so that the features' own gradient is checked too); host copies of the features, the
// NLL and every parameter's gradient come back in float64.
#include <torch/torch.h>

#include <map>
#include <string>

#include "model/transformer.h"
#include "util/execution_context.h"

namespace checks {

struct Pass {
  torch::Tensor features;  // (B, T, C) float64 on the CPU
  torch::Tensor nll;       // scalar float64
  std::map<std::string, torch::Tensor> grads;
};

inline Pass runPass(xtrap::Transformer& model, const torch::Tensor& tokens, const torch::Tensor& targets,
                    const xtrap::ForwardOptions& opt = {}) {
  model->zero_grad();
  for (auto& p : model->parameters()) p.mutable_grad() = torch::Tensor();
  auto f = model->features(tokens, opt);  // (B, T, C) on the model's device
  auto nll = model->tokenNll(f.reshape({-1, f.size(-1)}), targets).mean();
  auto loss = nll + f.to(torch::kFloat32).square().mean();
  loss.backward();
  Pass pass{xtrap::toHost(f).to(torch::kFloat64), xtrap::toHost(nll).to(torch::kFloat64), {}};
  for (const auto& p : model->named_parameters())
    if (p.value().grad().defined()) pass.grads[p.key()] = xtrap::toHost(p.value().grad()).to(torch::kFloat64);
  return pass;
}

}  // namespace checks
