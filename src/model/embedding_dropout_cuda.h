#pragma once
// The LibTorch side of the embedding scale + positions + dropout CUDA kernels
// (embedding_dropout.cuh): a torch::autograd::Function giving the embeddings and a learned
// position table their gradients. Compiled only where LibTorch has CUDA (XTRAP_WITH_CUDA_KERNELS).
#include <torch/torch.h>

namespace xtrap {

// Whether the kernels take x (B, T, C) float32 and positions ((T, C) float32 or undefined) on a GPU
// of compute capability 8.0+ (what the kernels are compiled for), fewer than 2^32 elements.
bool fusedEmbeddingDropoutTakes(const torch::Tensor& x, const torch::Tensor& positions);

// dropout(x * scale + positions) (B, T, C) float32, dropout p (0: none) with the default CUDA
// generator's state.
torch::Tensor fusedEmbeddingDropout(const torch::Tensor& x, double scale, const torch::Tensor& positions, double p);

}  // namespace xtrap
