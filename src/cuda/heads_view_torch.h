#pragma once
// A LibTorch (B, H, T, D) tensor as the kernels' HeadsView (heads_view.cuh), for the CUDA glue
// (linear_bias_attention_cuda.cpp, rotary_cuda.cpp). Compiled only where LibTorch has CUDA.
#include <torch/torch.h>

#include <cstdint>

#include "cuda/heads_view.cuh"

namespace xtrap {

// t itself where the kernels can read it with 16-byte loads (d contiguous, 16-byte aligned rows:
// true of the q, k, v views of the fused projection), else a contiguous copy.
inline torch::Tensor readable(const torch::Tensor& t) {
  bool ok = t.stride(3) == 1 && reinterpret_cast<uintptr_t>(t.data_ptr()) % 16 == 0 && t.stride(0) % 8 == 0 &&
            t.stride(1) % 8 == 0 && t.stride(2) % 8 == 0;
  return ok ? t : t.clone(at::MemoryFormat::Contiguous);
}

// t (B, H, T, D) as a view; t must be readable().
inline cuda::HeadsView viewOf(const torch::Tensor& t) { return {t.data_ptr(), t.stride(0), t.stride(1), t.stride(2)}; }

}  // namespace xtrap
