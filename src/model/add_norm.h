#pragma once
// The residual add of a pre-LN block's branch with its dropout, and the LayerNorm that follows it
// (the block's ln2, the next block's ln1, or ln_final after the last), as one operation:
//   out = x + dropout(y)   the new residual, float32
//   normed = norm(out)     the next matmul's input
// On the CPU (and wherever the fused kernel does not apply) it is LibTorch's operators and
// fastDropout, the same values and random draws as writing them out. On a GPU with the CUDA
// kernels it is add_norm.cu's one pass each way (add_norm_cuda.h): normed in bf16 under bf16
// autocast (what the next matmul casts it to), dropout's mask drawn from the CUDA generator and
// regenerated in the backward.
// B = batch, T = sequence length, C = features.
#include <torch/torch.h>

#include "model/norm.h"

namespace xtrap {

struct AddNormed {
  torch::Tensor out;     // (B, T, C) float32
  torch::Tensor normed;  // (B, T, C); undefined without a norm
};

// x (B, T, C) float32 residual, y (B, T, C) branch; dropout p where training; norm may be empty
// (no norm after the last block: out alone). `fused`: take the CUDA kernel where it applies (a
// LayerNorm; TransformerImpl::setFusedElementwise); matmulInput: a matmul takes normed, so the
// kernel writes it in autocast's dtype (else float32, as LayerNorm's).
AddNormed addNorm(const torch::Tensor& x, const torch::Tensor& y, const Norm& norm, double p, bool training, bool fused,
                  bool matmulInput);

}  // namespace xtrap
