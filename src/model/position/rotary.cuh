#pragma once
// Rotary position embedding (rotary.h) on CUDA in one pass: each bf16 element of q or k read once
// and written once, its rotation in float32. LibTorch's operators take eight passes over float32
// copies (cast, negate, concatenate, two products, a sum, the attention factor, cast back), and
// as many again in the backward: with them xtrap trained rotary 21% slower than with no position
// method at all on the H200 (results/gpu.md).
//
// A plain C++ API over raw device pointers (no LibTorch): the LibTorch glue is rotary_cuda.cpp.
// Rotate-half form: pair p of a row is (x[p], x[p + D/2]), rotated by the angle of its position
// and frequency,
//   y[p] = x[p] cos - x[p + D/2] sin,   y[p + D/2] = x[p + D/2] cos + x[p] sin,
// then times the attention factor. Each product and sum is rounded on its own (no fused
// multiply-add), in the order of the LibTorch path (Rotary::apply), so both give the same values
// (but for denormal floats, which the kernels flush to zero).
#include <cuda_runtime_api.h>

#include <cstdint>

#include "cuda/heads_view.cuh"

namespace xtrap::cuda {

struct RotaryArgs {
  HeadsView x;          // (B, H, T, D) input (heads_view.cuh's layout)
  void* out = nullptr;  // (B, H, T, D) contiguous bf16 output
  int B = 0, H = 0, T = 0, D = 0;
  const float* cos = nullptr;  // (T, D/2) float32 contiguous: cos of pair p's angle at row t
  const float* sin = nullptr;  // (T, D/2) float32 contiguous
  float factor = 1.f;          // the attention factor
  // The backward: the transposed rotation (sin negated) of the incoming gradient, the factor
  // applied to it first, as the autograd of the LibTorch path does.
  bool transposed = false;
};

// Why rotate cannot take these arguments (D not a positive multiple of 16, a dimension < 1), or
// nullptr.
const char* rotaryCheck(const RotaryArgs& args);

cudaError_t rotate(const RotaryArgs& args, cudaStream_t stream);

}  // namespace xtrap::cuda
