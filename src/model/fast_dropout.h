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

// Dropout of one block of rows of a larger tensor, regenerated from a seed: the keep decision of
// an element is that of its index in the whole tensor, so a block dropped in a forward pass and
// again in a backward pass (recomputed attention, recomputed_attention.h) gets the same mask
// whatever the blocking. The whole tensor is (outer, totalRows, totalCols); the block passed is
// (outer..., rows, cols) holding rows [rowOffset, rowOffset + rows) and columns [0, cols) of it.
// dropElements, behind fastDropout, is the block that is the whole tensor.
struct DropoutLayout {
  int64_t rowOffset = 0, totalRows = 1, totalCols = 1;
};
struct DroppedBlock {
  torch::Tensor out, mask;  // x with dropout applied; the keep decisions (one byte each)
  float scale;              // 1 / (1 - p), what kept elements are multiplied by
};
uint64_t drawDropoutSeed();  // from the default CPU generator, like fastDropout's own
// CPU float32, fewer than 2^32 elements in the whole tensor.
DroppedBlock dropBlock(const torch::Tensor& x, double p, uint64_t seed, const DropoutLayout& at);
// x * mask * scale (mask from dropBlock): dropout's backward, or its forward again.
torch::Tensor applyMask(const torch::Tensor& x, const torch::Tensor& mask, float scale);

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
