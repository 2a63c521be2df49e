#pragma once
// Gradient clipping by the global 2-norm, as PyTorch's clip_grad_norm_ (its foreach form): every
// gradient times min(1, maxNorm / (norm + 1e-6)), with the norm and the factor left on the
// gradients' device. LibTorch's C++ clip_grad_norm_ launches one norm and one multiply per
// parameter (150 small kernels a step for the 75 tensors of the 6-layer model) and reads the norm on
// the host, a synchronisation of its own; here the dense gradients' norms are one multi-tensor
// kernel (_foreach_norm) and, with LibTorch 2.1+, their scaling another, and the norm comes back as
// a tensor, which the trainer reads with the step's loss in one synchronisation. Sparse gradients
// (an untied embedding's) are scaled too: LibTorch 1.13's clip_grad_norm_ counted them in the norm
// but left them unscaled (its in-place product goes through .data(), which on a sparse tensor does
// not reach the gradient), and xtrap used it until 2026-11-26.
#include <torch/torch.h>

#include <vector>

namespace xtrap {

// Scales the defined gradients of `parameters` in place (dense and sparse alike); returns their
// global 2-norm before scaling: a 0-dim float32 tensor on their device (0 on the CPU if none has a
// gradient). maxNorm > 0.
torch::Tensor clipGradientNorm(const std::vector<torch::Tensor>& parameters, double maxNorm);

}  // namespace xtrap
