#pragma once
// Asynchronous copies from global to shared memory (PTX ISA, "cp.async") whose zero fill is chosen
// at run time: of kBytes copied, the first srcBytes are read from `from` and the rest are zeros (a
// tile's rows past the end of a sequence: srcBytes 0, nothing read). The toolkit's
// __pipeline_memcpy_async takes its zero fill as an immediate of the instruction, so a fill that
// depends on the row costs a branch between two copies (some ten instructions a copy in the fused
// attention kernels' PTX); CUTLASS's SM80_CP_ASYNC_CACHEGLOBAL_ZFILL passes it in a register, as
// here. They land as the toolkit's do: __pipeline_commit and __pipeline_wait_prior (cp.async's
// commit_group and wait_group) order them.
// tests/cuda_emulation/include/cuda/async_copy.cuh is this file's CPU twin.
#include <cuda_runtime.h>

namespace xtrap::cuda::async {

// kBytes 16 (cached in L2 only, .cg) or 4; `to` shared and `from` global, both kBytes-aligned.
template <int kBytes>
__device__ __forceinline__ void copy(void* to, const void* from, unsigned srcBytes) {
  static_assert(kBytes == 16 || kBytes == 4, "cp.async copies 4, 8 or 16 bytes; .cg only 16");
  const unsigned address = static_cast<unsigned>(__cvta_generic_to_shared(to));
  if constexpr (kBytes == 16)
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(address), "l"(from), "r"(srcBytes) : "memory");
  else
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(address), "l"(from), "r"(srcBytes) : "memory");
}

}  // namespace xtrap::cuda::async
