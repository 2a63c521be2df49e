#pragma once
// Stands in for src/cuda/warpgroup_mma.cuh in the CPU emulation (cuda_emulation.h): the
// same functions, the descriptors' bits and the register layouts as there, the products as the
// emulation's warpgroup operations (which read the descriptors as the PTX ISA lays the shared
// operands out, apart from the kernel's core_matrix_tile.h).
#include <cstdint>

#include "../../cuda_emulation.h"
#include "cuda/core_matrix_tile.h"

namespace xtrap::cuda::wgmma {

inline uint64_t descriptor(const __nv_bfloat16* start, uint32_t leadingBytes, uint32_t strideBytes) {
  return core::descriptor(cuda_emulation::sharedAddress(start), leadingBytes, strideBytes);
}

inline void arrive() { cuda_emulation::warpgroupArrive(); }
inline void commit() { cuda_emulation::warpgroupCommit(); }
template <int kPending = 0>
inline void wait() {
  cuda_emulation::warpgroupWait(kPending);
}
inline void fenceSharedWrites() { cuda_emulation::fenceProxyAsync(); }

template <typename E, int N>
inline void fenceOperands(E (&)[N][4]) {}

template <bool kTransposeA = false, bool kTransposeB = false>
inline void multiplyAdd(float (&d)[8][4], uint64_t a, uint64_t b) {
  cuda_emulation::warpgroupMultiplyAdd(d, nullptr, a, b, kTransposeA, kTransposeB, true);
}

template <bool kTransposeA = false, bool kTransposeB = false>
inline void multiply(float (&d)[8][4], uint64_t a, uint64_t b) {
  cuda_emulation::warpgroupMultiplyAdd(d, nullptr, a, b, kTransposeA, kTransposeB, false);
}

inline void multiplyAdd(float (&d)[8][4], const uint32_t (&a)[4], uint64_t b) {
  cuda_emulation::warpgroupMultiplyAdd(d, a, 0, b, false, true, true);
}

}  // namespace xtrap::cuda::wgmma
