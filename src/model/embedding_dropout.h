#pragma once
// The embedding's scale, its position add and the dropout after them, as one operation:
//   dropout(x * scale + positions)
// x the (B, T, C) float32 token embeddings, scale sqrt(C) where the model scales them (1: none),
// positions a (T, C) table (sinusoidal, or the learned positions of 0..T-1) or none. On the CPU
// (and wherever the fused kernel does not apply) it is LibTorch's operators and fastDropout, the
// same values and random draws as writing them out. On a GPU with the CUDA kernels it is
// embedding_dropout.cu's one pass each way (embedding_dropout_cuda.h), the mask regenerated in
// the backward from the CUDA generator's recorded state.
#include <torch/torch.h>

namespace xtrap {

// x (B, T, C) float32, positions (T, C) or undefined -> (B, T, C) float32; dropout p where
// training. `fused`: take the CUDA kernel where it applies (TransformerImpl::setFusedElementwise).
torch::Tensor embeddingDropout(const torch::Tensor& x, double scale, const torch::Tensor& positions, double p,
                               bool training, bool fused);

}  // namespace xtrap
