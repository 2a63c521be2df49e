#pragma once
// The LibTorch side of the fused ALiBi-family CUDA kernel (linear_bias_attention.cuh): a
// torch::autograd::Function, so q, k, v, the slopes in use (learned ones through their sigmoid
// and interpolation divisor) and the first-token bias get their gradients through the model's
// usual graph. Compiled only where LibTorch has CUDA (XTRAP_WITH_CUDA_KERNELS).
#include <optional>
#include <string>
#include <vector>

#include "model/position/linear_bias.h"
#include "model/position/linear_bias_attention.cuh"

namespace xtrap {

// Whether the fused kernel takes attention of this many heads of this dimension with this
// dropout on `device` (a GPU of compute capability 8.0+ with shared memory enough for its tiles;
// bfloat16 inputs aside): the attention plan's test.
bool fusedLinearBiasAttentionTakes(int64_t heads, int64_t headDim, double dropout, torch::Device device);

// Why the fused kernel cannot take these inputs (one line), or "" when it can: q, k, v
// (B, H, T, D) bfloat16 on one GPU that can run it, D 64 or 128, H <= 64, dropout in [0, 1).
std::string fusedLinearBiasAttentionUnsupported(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                                double dropout);

// softmax(scale q k^T + bias) v with dropout `dropout` on the probabilities: (B, H, T, D) bf16.
// The bias is `bias`'s spec with its current slopes and first-token bias; `causal` also blocks
// every later key. Dropout draws its seed from LibTorch's default CPU generator (torch::manual_seed).
// `backward`: the scheme of the backward (cuda::BackwardScheme); none: the faster one as measured
// on an H200 (results/gpu.md, 2026-11-27), AtomicDq where no bias parameter takes a gradient
// (0.88-0.97x of TwoPass's time at every case) and TwoPass where one does (0.73-0.81x of
// AtomicDq's). `skipNegligible`: skip the tile
// pairs whose every probability is below 2^-136 (ForwardArgs::tileBounds), which change no output
// bit in the backward and less than 2^-136 of it in the forward; false computes every open pair
// (bench_attention's dense rows, to show what the skipping gains). `products`: the tile products of
// the forward and the backward (cuda::TileProducts; WarpgroupMma on compute capability 9.0 only,
// else an error).
torch::Tensor fusedLinearBiasAttention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                       const LinearBias& bias, bool causal, double scale, double dropout,
                                       std::optional<cuda::BackwardScheme> backward = std::nullopt,
                                       bool skipNegligible = true,
                                       cuda::TileProducts products = cuda::TileProducts::WarpMma);

// The warpgroup MMA's tile products alone (cuda::linearBiasAttentionProbeWarpgroupProducts): from
// q, k, v (64, D) and p (64, 64) bfloat16 on one GPU of compute capability 9.0, D 64 or 128, the
// float32 {q k^T, q k^T by the product that overwrites, p v, p^T k} as the kernels compute each.
std::vector<torch::Tensor> probeWarpgroupProducts(const torch::Tensor& q, const torch::Tensor& k,
                                                  const torch::Tensor& v, const torch::Tensor& p);

}  // namespace xtrap
