#pragma once
// The LibTorch side of the activation + dropout CUDA kernels (activation_dropout.cuh): a
// torch::autograd::Function that keeps h (and the random state's record) for its backward.
// Compiled only where LibTorch has CUDA (XTRAP_WITH_CUDA_KERNELS).
#include <torch/torch.h>

#include "model/activation_dropout.h"

namespace xtrap {

// Whether the kernels take h: bf16 or float32 on a GPU of compute capability 8.0+ (what the
// kernels are compiled for), fewer than 2^32 elements.
bool fusedActivationDropoutTakes(const torch::Tensor& h);

// dropout(act(h)) in h's dtype, dropout p (0: none) with the default CUDA generator's state.
torch::Tensor fusedActivationDropout(const torch::Tensor& h, Activation activation, double p);

}  // namespace xtrap
