#pragma once
// Two bf16 in a 32-bit word, the element at the lower address in the lower half: how kernels that
// move bf16 rows 16 bytes at a time (uint4) see them. A bf16 is the upper half of its float.
#include <cuda_bf16.h>

#include <cstdint>

namespace xtrap::cuda {

__device__ __forceinline__ float lowBf16(uint32_t w) { return __uint_as_float(w << 16); }
__device__ __forceinline__ float highBf16(uint32_t w) { return __uint_as_float(w & 0xffff0000u); }

// lo and hi rounded to bf16 (to nearest even), lo in the lower half.
__device__ __forceinline__ uint32_t bf16Word(float lo, float hi) {
  return uint32_t(__bfloat16_as_ushort(__float2bfloat16(lo))) |
         (uint32_t(__bfloat16_as_ushort(__float2bfloat16(hi))) << 16);
}

}  // namespace xtrap::cuda
