#include "model/norm.h"

#include <stdexcept>

namespace xtrap {

NormKind parseNormKind(const std::string& name) {
  if (name == "layer") return NormKind::Layer;
  if (name == "rms") return NormKind::Rms;
  if (name == "rms-one-plus") return NormKind::RmsOnePlus;
  throw std::invalid_argument("unknown norm '" + name + "' (layer, rms, rms-one-plus)");
}

NormImpl::NormImpl(NormKind kind, int64_t width, double eps) : kind(kind), eps(eps) {
  weight = register_parameter("weight", kind == NormKind::RmsOnePlus ? torch::zeros({width}) : torch::ones({width}));
  if (kind == NormKind::Layer) bias = register_parameter("bias", torch::zeros({width}));
}

torch::Tensor NormImpl::forward(const torch::Tensor& x) {
  if (kind == NormKind::Layer) return torch::layer_norm(x, {weight.size(0)}, weight, bias, eps);
  // Statistics in float32 whatever x is (float64 stays float64: the reference tests).
  auto xf = x.scalar_type() == torch::kFloat64 ? x : x.to(torch::kFloat32);
  auto normed = xf * torch::rsqrt(xf.pow(2).mean(-1, true) + eps);
  if (kind == NormKind::RmsOnePlus) return (normed * (1.0 + weight.to(xf.scalar_type()))).to(x.scalar_type());
  return normed.to(x.scalar_type()) * weight;
}

}  // namespace xtrap
