#pragma once
// The residual add with dropout and the LayerNorm after it, on CUDA, in one pass over each row
// (add_norm.h): where LibTorch's operators read and write the (N, C) stream five times (dropout,
// add, LayerNorm, the cast to bf16 for the next matmul), the kernel reads x and y once and writes
// the new residual and its normed bf16 copy once. As Apex's and flash-attention's
// dropout_add_layer_norm.
//   out    = x + dropout(y)                       float32, the residual stream
//   normed = (out - mean) * rstd * weight + bias  float32 or bf16, the next matmul's input
// with mean and rstd = 1 / sqrt(var + eps) of each row of out (var biased, as LayerNorm's).
// Dropout is counter_dropout.h's, element r * C + c, its factor applied in float32.
//
// A plain C++ API over raw device pointers (no LibTorch): the LibTorch glue is add_norm_cuda.cpp.
// N = rows, C = columns (features); every (N, C) tensor contiguous.
#include <cuda_runtime_api.h>

#include <cstdint>

#include "model/counter_dropout.h"

namespace xtrap::cuda {

struct AddNormArgs {
  int64_t rows = 0, cols = 0;  // N, C; N * C < 2^32 (dropout's element index)
  const float* x = nullptr;    // (N, C) residual
  const void* y = nullptr;     // (N, C) branch, bf16 where yBf16, else float32
  bool yBf16 = false;
  const float* weight = nullptr;  // (C)
  const float* bias = nullptr;    // (C)
  float eps = 1e-5f;
  CounterDropout dropout;
  float* out = nullptr;    // (N, C) x + dropout(y)
  void* normed = nullptr;  // (N, C) bf16 where normedBf16, else float32
  bool normedBf16 = false;
  float* mean = nullptr;  // (N) of each row of out
  float* rstd = nullptr;  // (N)
};

cudaError_t addNormForward(const AddNormArgs& args, cudaStream_t stream);

// The backward from the forward's out, mean, rstd and dropout (its rng reading the forward's
// resolved seed and offset), given dOut (the residual's own gradient, nullptr for none) and
// dNormed (bf16 where normedBf16):
//   dX = dOut + rstd * (g - mean_c(g) - xhat * mean_c(g * xhat)),  g = dNormed * weight,
//   dY = dropout's factor * dX (bf16 where yBf16),
//   dWeight = sum_r dNormed * xhat, dBias = sum_r dNormed (float32 (C)),
// with xhat = (out - mean) * rstd. The column sums go through `partial`, a float32 workspace of
// addNormPartialFloats(rows, cols) floats, in a fixed order (the same bits run to run).
struct AddNormBackwardArgs {
  AddNormArgs forward;          // out, mean, rstd, weight, dropout, shapes and dtypes; x, y, normed unused
  const float* dOut = nullptr;  // (N, C) or nullptr
  const void* dNormed = nullptr;
  float* dX = nullptr;  // (N, C)
  void* dY = nullptr;   // (N, C)
  float* dWeight = nullptr;
  float* dBias = nullptr;
  float* partial = nullptr;
};

int64_t addNormPartialFloats(int64_t rows, int64_t cols);
cudaError_t addNormBackward(const AddNormBackwardArgs& args, cudaStream_t stream);

}  // namespace xtrap::cuda
