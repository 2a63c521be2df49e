#pragma once
// Stands in for src/cuda/warp_mma.cuh in the CPU emulation (cuda_emulation.h): the same
// functions with the same register layouts (listed there, from the PTX ISA), as warp collectives
// of the emulated warp. This directory comes first on the emulated kernels' include path, so the
// kernel file's #include "cuda/warp_mma.cuh" finds this file.
#include <cstdint>

#include "../../cuda_emulation.h"

namespace xtrap::cuda::mma {

inline void multiplyAdd(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  cuda_emulation::multiplyAddM16N8K16(d, a, b0, b1);
}

inline void loadMatrices(uint32_t (&r)[4], const __nv_bfloat16* row) { cuda_emulation::loadMatrices(r, row, false); }

inline void loadMatricesTransposed(uint32_t (&r)[4], const __nv_bfloat16* row) {
  cuda_emulation::loadMatrices(r, row, true);
}

inline uint32_t packBf16(float lo, float hi) {
  return uint32_t(__float2bfloat16(lo).bits) | (uint32_t(__float2bfloat16(hi).bits) << 16);
}

}  // namespace xtrap::cuda::mma
