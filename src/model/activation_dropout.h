#pragma once
// The feed-forward block's activation and the dropout after it, as one operation:
//   dropout(act(h)),  act = GELU (erf), GELU (tanh approximation), ReLU or SiLU
// on fc1's output h (its bias already added by the matmul). On the CPU (and wherever the fused
// kernel does not apply) it is LibTorch's activation and fastDropout, the same values and random
// draws as writing them out. On a GPU with the CUDA kernels it is activation_dropout.cu's one
// pass each way (activation_dropout_cuda.h), whose backward reads h alone: the mask is regenerated
// from the CUDA generator's recorded state, not stored.
#include <torch/torch.h>

namespace xtrap {

enum class Activation { Gelu, GeluTanh, Relu, Silu };  // Silu: SwiGLU's gate, LibTorch's operators only

// h (..., F) -> (..., F) in h's dtype; dropout p where training. `fused`: take the CUDA kernel
// where it applies (TransformerImpl::setFusedElementwise).
torch::Tensor activationDropout(const torch::Tensor& h, Activation activation, double p, bool training, bool fused);

}  // namespace xtrap
