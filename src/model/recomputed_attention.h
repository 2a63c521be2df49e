#pragma once
// Attention for training whose backward recomputes the probabilities instead of keeping them:
// the forward pass runs query blocks without recording a graph and keeps only q, k, v and the
// bias; the backward pass runs each block's logits, softmax and dropout mask again (the mask from
// the same seed and whole-tensor indices, fast_dropout.h) and forms dq, dk, dv and the bias's
// gradient from them by hand. What autograd would keep per layer until backward, the (B, H, T, T)
// probabilities and their dropout mask (36 MiB + 9 MiB a layer for the quickstart model's
// causal blocks), is never held; one block's temporaries are. The cost is the logits and softmax
// computed twice. FlashAttention's idea (Dao et al., 2022) at the granularity of query blocks
// on the CPU, where LibTorch 1.13 has no fused attention. Values and gradients equal the
// reference path's (attention_plan.h); the dropout masks are drawn differently.
// q (already scaled by 1/sqrt(D)), k, v: (B, H, T, D) in the compute precision.
#include <torch/torch.h>

namespace xtrap {

// bias: (H|1, T, T) float32 with the causal -inf included, or undefined (no bias, not causal);
// its gradient is returned when it requires one (learned slopes, T5, KERPLE, FIRE). `causal`:
// query rows skip the keys after their block. Dropout (p > 0) needs CPU float32 probabilities.
// Query blocks of `blockRows` rows (recomputeBlockRows, attention_plan.h). Returns (B, H, T, D).
torch::Tensor recomputedAttention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                  const torch::Tensor& bias, bool causal, double dropout, int64_t blockRows);

}  // namespace xtrap
