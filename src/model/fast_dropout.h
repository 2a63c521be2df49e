#pragma once
// Inverted dropout with a counter-based mask drawn in parallel.
// LibTorch's CPU dropout (1.13) draws a float Bernoulli mask serially from the global mt19937,
// then divides and multiplies it in two more passes; on attention probabilities (B, H, T, T)
// that serial draw alone took a large part of a small model's training step. Here one parallel
// pass hashes (seed, element index) into the keep decision, writes the output and a one-byte
// mask; backward is one pass over the mask. The seed comes from the default CPU generator, so
// torch::manual_seed and a checkpointed generator state still reproduce the masks. CPU float32
// only; other tensors take LibTorch's dropout.
#include <torch/torch.h>

namespace xtrap {

// Zeroes each element with probability p and scales the rest by 1 / (1 - p); identity when
// !training or p == 0. Differentiable with respect to x.
torch::Tensor fastDropout(const torch::Tensor& x, double p, bool training);

// fastDropout(probs, p, training).to(v's dtype).matmul(v), the same values and masks, without keeping the
// dropped probabilities for backward: it keeps probs (the softmax before it keeps them already)
// and the one-byte mask, and rebuilds the product's input in backward. On attention
// probabilities (B, H, Tq, Tk) that is one float32 copy of them less per layer until backward.
// probs (..., Tq, Tk), v (..., Tk, D) -> (..., Tq, D).
torch::Tensor dropoutMatmul(const torch::Tensor& probs, const torch::Tensor& v, double p, bool training);

}  // namespace xtrap
