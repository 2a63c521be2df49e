#pragma once
// The LibTorch side of add & norm's CUDA kernels (add_norm.cuh): a torch::autograd::Function over
// the fused forward and backward, x, y, the LayerNorm's weight and bias getting their gradients.
// Compiled only where LibTorch has CUDA (XTRAP_WITH_CUDA_KERNELS).
#include <torch/torch.h>

#include "model/add_norm.h"

namespace xtrap {

// Whether the kernels take x and y: x float32 and y bf16 or float32, of one shape (..., C), on a GPU
// of compute capability 8.0+ (what the kernels are compiled for), fewer than 2^32 elements.
bool fusedAddNormTakes(const torch::Tensor& x, const torch::Tensor& y);

// out = x + dropout(y) (float32), normed = LayerNorm(out) * weight + bias in normedDtype (bf16 or
// float32); dropout p (0: none) with the default CUDA generator's state, regenerated in backward.
AddNormed fusedAddNorm(const torch::Tensor& x, const torch::Tensor& y, const torch::Tensor& weight,
                       const torch::Tensor& bias, double eps, double p, torch::ScalarType normedDtype);

}  // namespace xtrap
