#pragma once
// The normalisation of a block's input (or output, for sandwich blocks), one of three kinds:
//  - layer:        LayerNorm, weight and bias (xtrap's own blocks, BLOOM, MPT)
//  - rms:          x / sqrt(mean(x^2) + eps) * w, the statistics in float32, the weight applied
//                  after the cast back to x's type (transformers' LlamaRMSNorm)
//  - rms-one-plus: the same with x_hat * (1 + w), in float32 (GemmaRMSNorm; w starts at 0)
// Per-head q/k norms (Qwen3, Gemma 3) are the same module over the head dimension.
// Shapes: x (..., C) -> (..., C).
#include <torch/torch.h>

#include <string>

namespace xtrap {

enum class NormKind { Layer, Rms, RmsOnePlus };
NormKind parseNormKind(const std::string& name);  // ModelConfig::normNames(); throws on others

struct NormImpl : torch::nn::Module {
  NormImpl(NormKind kind, int64_t width, double eps);
  torch::Tensor forward(const torch::Tensor& x);

  NormKind kind;
  double eps;
  torch::Tensor weight;  // (C): 1 for layer and rms, 0 for rms-one-plus at initialisation
  torch::Tensor bias;    // (C): layer only; undefined otherwise
};
TORCH_MODULE(Norm);

}  // namespace xtrap
