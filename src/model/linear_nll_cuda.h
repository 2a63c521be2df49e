#pragma once
// The LibTorch side of linearNll's CUDA passes (linear_nll.cuh): one block of classes at a time,
// from its bf16 logits. Compiled only where LibTorch has CUDA (XTRAP_WITH_CUDA_KERNELS).
#include <torch/torch.h>

namespace xtrap {

// Whether the passes take logits of matmuls in `dtype` on `device`: bf16 on a GPU of compute
// capability 8.0+ (what the kernels are compiled for).
bool fusedNllTakes(const torch::Device& device, torch::ScalarType dtype);

// logits (N, n) bf16 of classes [begin, begin + n) with contiguous rows, bias (n) float32 or
// undefined, targets (N) int64, all on one GPU. lse and targetLogit (N) float32 contiguous,
// updated in place: lse = logaddexp(lse, logsumexp(logits + bias)), and the target's logit for the
// rows whose target lies in the block.
void fusedNllBlockForward(const torch::Tensor& logits, const torch::Tensor& bias, const torch::Tensor& targets,
                          int64_t begin, torch::Tensor& lse, torch::Tensor& targetLogit);

// (N, n) bf16: (exp(logits + bias - lse) - onehot(target - begin)) * gradNll, row by row;
// lse and gradNll (N) float32.
torch::Tensor fusedNllBlockGradient(const torch::Tensor& logits, const torch::Tensor& bias,
                                    const torch::Tensor& targets, int64_t begin, const torch::Tensor& lse,
                                    const torch::Tensor& gradNll);

}  // namespace xtrap
