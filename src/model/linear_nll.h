#pragma once
// Per-row negative log-likelihood of a linear classifier, -log softmax(x W^T + b)[target], in
// blocks of classes: at most ~kMaxBlockLogits logits exist at a time, in the forward (a running
// log-sum-exp over the blocks) and in the backward (which recomputes each block's logits from x
// and W, and writes each block of dW once). The plain expression holds all N x V logits, their
// log-softmax and their gradient at once: 4096 rows x 267,735 words (WikiText-103) is 4.4 GB per
// copy. Numerically it is the plain expression: the matmul runs in the compute dtype autocast
// gives it (or the inputs' own), log-softmax in float32, and the backward casts the logits'
// gradient back to the compute dtype as autograd through `.to(float32)` would. With bf16 operands
// on a GPU, each block's float32 work (the forward's log-sum-exp and target logit, the backward's
// softmax - onehot) is one kernel pass over its bf16 logits (linear_nll.cuh) instead of LibTorch
// operators over float32 copies of them.
// N = rows, K = features, V = classes.
#include <torch/torch.h>

namespace xtrap {

// 4 MiB of float32 logits. A block's logits and their softmax are alive at the peak of a training
// step (the end of the forward pass, every activation still kept), and the allocator's heap keeps
// the room they took: 16 MiB blocks left the quickstart model's heap ~80 MiB larger at 100M
// tokens (malloc statistics per step; results/corpus_scale.md).
constexpr int64_t kMaxBlockLogits = int64_t(1) << 20;
// On a GPU, 1 GiB of float32 logits. There a block's matmul has to fill the device: at 2^20 a
// 16,384-row step (32 x 512 tokens) would run in blocks of 64 classes, some 520 small matmuls
// for WikiText-2's 33,278 words, and the device's memory is not the CPU heap above.
constexpr int64_t kMaxBlockLogitsCuda = int64_t(1) << 28;
// With the fused passes (bf16 on a GPU) and a backward to come, up to 2^30 logits (2 GiB in bf16)
// are one block whose logits the forward keeps for the backward, instead of recomputing them
// there: a fourth N x K x V matmul, about 2 ms of a 32 ms step at 16,384 x 512 x 33,278 on the H100
// (each of eager's three took 1.9 to 2.5 ms; results/gpu/profile_eager_alibi.txt). Eager holds
// those logits too, in bf16 and float32.
constexpr int64_t kMaxKeptLogitsCuda = int64_t(1) << 30;

// x (N, K), weight (V, K), bias (V) or undefined, targets (N) int64 in [0, V) -> (N) float32.
// Differentiable in x, weight and bias. `maxBlockLogits`: 0 for the default of x's device (the
// constants above); tests pass a small one to get many blocks.
// Rows with a target outside [0, V) get the log-sum-exp alone (callers pass valid targets).
torch::Tensor linearNll(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias,
                        const torch::Tensor& targets, int64_t maxBlockLogits = 0);

}  // namespace xtrap
