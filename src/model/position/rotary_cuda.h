#pragma once
// The LibTorch side of rotary's CUDA kernel (rotary.cuh): a torch::autograd::Function whose
// backward is the transposed rotation of the incoming gradient, so q and k get their gradients
// through the model's usual graph. Compiled only where LibTorch has CUDA (XTRAP_WITH_CUDA_KERNELS).
#include <torch/torch.h>

namespace xtrap {

// Whether the kernel takes x: (B, H, T, D) bfloat16 on a GPU of compute capability 8.0+ (what the
// kernels are compiled for), of a shape cuda::rotaryCheck accepts (none empty, D a multiple of 16).
bool fusedRotaryTakes(const torch::Tensor& x);

// x rotated pair by pair by the angles whose float32 cos and sin are the (T, D/2) tables (on x's
// GPU), times factor (rotary.cuh): (B, H, T, D) bfloat16, contiguous.
torch::Tensor fusedRotary(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin, double factor);

}  // namespace xtrap
