#pragma once
// How the CUDA kernels that read attention's per-head rows (linear_bias_attention.cuh,
// rotary.cuh) see a (B, H, T, D) bf16 tensor. A plain struct over a raw device pointer: no LibTorch.
#include <cstdint>

namespace xtrap::cuda {

// A (B, H, T, D) bf16 tensor: element (b, h, t, d) at data[b * sb + h * sh + t * st + d].
// Strides in elements; d is contiguous. The kernels read rows with 16-byte loads, so the pointer
// must be 16-byte aligned and sb, sh, st multiples of 8 (true of contiguous tensors and of the
// q/k/v views of one fused (B, T, 3, H, D) projection).
struct HeadsView {
  void* data = nullptr;  // __nv_bfloat16
  int64_t sb = 0, sh = 0, st = 0;
};

}  // namespace xtrap::cuda
