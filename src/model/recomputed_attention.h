#pragma once
// Attention for training whose backward recomputes the probabilities instead of keeping them:
// the forward pass runs query blocks without recording a graph and keeps only q, k, v; each
// block's bias comes from a function of the block (the provider's, attention.h), called in the
// forward pass and again in the backward pass, so no (H, T, T) bias exists at any time. The
// backward pass runs each block's bias, logits, softmax and dropout mask again (the mask from the
// same seed and whole-tensor indices, fast_dropout.h) and forms dq, dk, dv from them by hand; the
// bias parameters' gradients are accumulated block by block, by autograd through the block's
// bias recorded in the backward pass with that block's bias gradient. What autograd would keep per
// layer until backward, the (B, H, T, T) probabilities and their dropout mask (36 MiB + 9 MiB a
// layer for the quickstart model's causal blocks), is never held, nor the (H, T, T) bias and its
// gradient; one block's temporaries are. The cost is the bias, logits and softmax computed twice.
// FlashAttention's idea (Dao et al., 2022) at the granularity of query blocks on the CPU, where
// LibTorch 1.13 has no fused attention. Values and gradients equal the reference path's
// (attention_plan.h); the dropout masks are drawn differently.
// q (already scaled by 1/sqrt(D)), k, v: (B, H, T, D) in the compute precision.
#include <torch/torch.h>

#include <functional>
#include <vector>

namespace xtrap {

// The bias of query rows [q0, q1) against keys [0, keys), the causal mask included:
// (H|1, q1 - q0, keys) float32, or undefined (nothing to add). Called in the forward pass and
// again in the backward pass (with autograd recording when the bias parameters need a gradient):
// it must give the same values both times, and whatever it reads must outlive the backward pass.
using QueryBlockBias = std::function<torch::Tensor(int64_t q0, int64_t q1, int64_t keys)>;

// `biasParameters`: every tensor the block bias depends on (the provider's parameters); those
// that require a gradient receive it. `causal`: query rows skip the keys after their block.
// Dropout (p > 0) needs CPU float32 probabilities. Query blocks of `blockRows` rows
// (recomputeBlockRows, attention_plan.h). Returns (B, H, T, D).
torch::Tensor recomputedAttention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                  const QueryBlockBias& blockBias, const std::vector<torch::Tensor>& biasParameters,
                                  bool causal, double dropout, int64_t blockRows);

}  // namespace xtrap
