#include "train/gradient_clip.h"

#include "util/torch_compat.h"

namespace xtrap {

torch::Tensor clipGradientNorm(const std::vector<torch::Tensor>& parameters, double maxNorm) {
  torch::NoGradGuard noGrad;
  std::vector<torch::Tensor> dense, sparse;  // the gradients, by layout: foreach ops take dense ones
  for (const auto& p : parameters) {
    const auto& g = p.grad();
    if (g.defined()) (g.is_sparse() ? sparse : dense).push_back(g);
  }
  if (dense.empty() && sparse.empty()) return torch::zeros({});
  std::vector<torch::Tensor> norms;  // 0-dim each
  if (!dense.empty()) norms = at::_foreach_norm(dense, 2);
  for (const auto& g : sparse) norms.push_back(g.norm(2));
  auto total = norms.size() == 1 ? norms[0] : torch::stack(norms).norm(2);
  auto factor = torch::clamp(maxNorm / (total + 1e-6), c10::nullopt, 1.0);  // 0-dim, on the device
  compat::multiplyEach(dense, factor);
  for (auto& g : sparse) g.mul_(factor);
  return total;
}

}  // namespace xtrap
