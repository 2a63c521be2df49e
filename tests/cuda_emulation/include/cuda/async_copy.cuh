#pragma once
// Stands in for src/cuda/async_copy.cuh in the CPU emulation (cuda_emulation.h): the
// emulated cp.async with the zero fill given as the toolkit's function takes it (kBytes - srcBytes
// zeros at the end), landing where the emulation lands every asynchronous copy.
#include "../../cuda_emulation.h"

namespace xtrap::cuda::async {

template <int kBytes>
inline void copy(void* to, const void* from, unsigned srcBytes) {
  static_assert(kBytes == 16 || kBytes == 4, "cp.async copies 4, 8 or 16 bytes; .cg only 16");
  __pipeline_memcpy_async(to, from, kBytes, kBytes - srcBytes);
}

}  // namespace xtrap::cuda::async
