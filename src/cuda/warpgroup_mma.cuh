#pragma once
// Hopper's warpgroup MMA (PTX ISA, "wgmma.mma_async", sm_90a) as the fused attention kernels use
// it (TileProducts::WarpgroupMma): the 4 warps of a block (one warpgroup) compute a (64, 64) fp32 tile product in one
// instruction per 16 of K, reading the B operand (and A, unless it is in registers) from shared
// memory once for the 4 warps, where mma.sync (warp_mma.cuh) has each warp read every B fragment
// with ldmatrix for its own 16 rows.
// tests/cuda_emulation/include/cuda/warpgroup_mma.cuh is this file's CPU twin.
//
// Registers: warp w of the warpgroup holds rows 16w .. 16w + 15 of the (64, N) accumulator, each
// 8-column block n of them as mma.sync's C fragment (warp_mma.cuh): d[n][0], d[n][1] = row g,
// columns 8n + 2t, 8n + 2t + 1; d[n][2], d[n][3] the same of row g + 8. An A operand in registers is
// mma.sync's A fragment of the warp's 16 rows (CUTLASS's ALayout_64x16 for SM90 register A).
// Shared operands are core-matrix tiles (core_matrix_tile.h) given by their descriptor.
//
// Order (PTX ISA, "Asynchronous Warpgroup Level Matrix Multiply-Accumulate Operation"):
// arrive() (wgmma.fence) before the first multiplyAdd whose registers other instructions wrote;
// multiplyAdd ...; commit() closes the group; wait() returns once it is done (wait<1>() once all
// but the last committed group are), before which neither its accumulators, nor its A in registers,
// nor its shared operands may be touched. fenceOperands around them keeps the compiler from moving
// their other uses across (the asm statements name them only where they are issued). Shared memory
// written by ordinary stores or cp.async must be fenced for the async proxy that wgmma reads
// through (fenceSharedWrites, by each writing thread, then a barrier).
//
// Compiled to the instructions only for sm_90a (__CUDA_ARCH_FEAT_SM90_ALL); elsewhere each
// function traps: the launcher runs the kernels that call these only on compute capability 9.0.
#include <cuda_bf16.h>

#include <cstdint>
#include <type_traits>

#include "cuda/core_matrix_tile.h"

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define XTRAP_WGMMA_ASM(...) asm volatile(__VA_ARGS__)
#else
#define XTRAP_WGMMA_ASM(...) __trap()
#endif

// The 32 fp32 accumulators of an m64n64 product, d[8][4], as the asm statements' operands %0 ..
// %31: in-out ("+f") where the product adds to them, out ("=f") where it overwrites them.
#define XTRAP_WGMMA_ACCUMULATORS(c, d)                                                                            \
  c(d[0][0]), c(d[0][1]), c(d[0][2]), c(d[0][3]), c(d[1][0]), c(d[1][1]), c(d[1][2]), c(d[1][3]), c(d[2][0]),     \
      c(d[2][1]), c(d[2][2]), c(d[2][3]), c(d[3][0]), c(d[3][1]), c(d[3][2]), c(d[3][3]), c(d[4][0]), c(d[4][1]), \
      c(d[4][2]), c(d[4][3]), c(d[5][0]), c(d[5][1]), c(d[5][2]), c(d[5][3]), c(d[6][0]), c(d[6][1]), c(d[6][2]), \
      c(d[6][3]), c(d[7][0]), c(d[7][1]), c(d[7][2]), c(d[7][3])
// The product with both operands in shared memory: %32, %33 their descriptors, %34 scale-d (whether
// d is added to), %35, %36 their transposes.
#define XTRAP_WGMMA_SHARED_PRODUCT                                                    \
  "{\n.reg .pred accumulate;\nsetp.ne.b32 accumulate, %34, 0;\n"                      \
  "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "                             \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "           \
  "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, " \
  "%32, %33, accumulate, 1, 1, %35, %36;\n}\n"

namespace xtrap::cuda::wgmma {

// The descriptor of a core-matrix tile's operand starting at `start` (core_matrix_tile.h).
__device__ __forceinline__ uint64_t descriptor(const __nv_bfloat16* start, uint32_t leadingBytes,
                                               uint32_t strideBytes) {
  return core::descriptor(static_cast<uint32_t>(__cvta_generic_to_shared(start)), leadingBytes, strideBytes);
}

__device__ __forceinline__ void arrive() { XTRAP_WGMMA_ASM("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void commit() { XTRAP_WGMMA_ASM("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
// Returns once at most kPending of this thread's committed groups are in flight: groups complete in
// the order they were committed, so wait<1>() after committing two gives the first one's results.
template <int kPending = 0>
__device__ __forceinline__ void wait() {
  XTRAP_WGMMA_ASM("wgmma.wait_group.sync.aligned %0;\n" ::"n"(kPending) : "memory");
}
// This thread's earlier shared-memory writes (generic proxy, cp.async's included) made visible to
// later wgmma reads (async proxy).
__device__ __forceinline__ void fenceSharedWrites() {
  XTRAP_WGMMA_ASM("fence.proxy.async.shared::cta;\n" ::: "memory");
}

// Accumulators (float) or an A operand in registers (uint32_t), which this keeps in them until here.
template <typename E, int N>
__device__ __forceinline__ void fenceOperands(E (&d)[N][4]) {
  static_assert(std::is_same_v<E, float> || std::is_same_v<E, uint32_t>, "fp32 accumulators or bf16x2 A words");
#pragma unroll
  for (int n = 0; n < N; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      if constexpr (std::is_same_v<E, float>)
        asm volatile("" : "+f"(d[n][e])::"memory");
      else
        asm volatile("" : "+r"(d[n][e])::"memory");
    }
}

// d (64, 64) += a (64, 16) b (16, 64), both in shared memory: m64n64k16, bf16 in, fp32 (scale-d,
// the predicate that keeps d, true: CUTLASS's form, set from a register). K-major (transposed
// false): a's rows along M, b's along N, 8 elements of K each; MN-major (true): rows along K.
template <bool kTransposeA = false, bool kTransposeB = false>
__device__ __forceinline__ void multiplyAdd(float (&d)[8][4], uint64_t a, uint64_t b) {
  XTRAP_WGMMA_ASM(XTRAP_WGMMA_SHARED_PRODUCT
                  : XTRAP_WGMMA_ACCUMULATORS("+f", d)
                  : "l"(a), "l"(b), "r"(1), "n"(int(kTransposeA)), "n"(int(kTransposeB)));
}

// d = a b, the same operands (scale-d false): the first k-step of a product that starts at zero.
// d's values are neither read nor needed, where a product added to cleared accumulators took 32
// moves to clear them (SASS sm_90a).
template <bool kTransposeA = false, bool kTransposeB = false>
__device__ __forceinline__ void multiply(float (&d)[8][4], uint64_t a, uint64_t b) {
  XTRAP_WGMMA_ASM(XTRAP_WGMMA_SHARED_PRODUCT
                  : XTRAP_WGMMA_ACCUMULATORS("=f", d)
                  : "l"(a), "l"(b), "r"(0), "n"(int(kTransposeA)), "n"(int(kTransposeB)));
}

// d (64, 64) += a (64, 16) b (16, 64): a this warp's 16 rows in registers (mma.sync's A fragment),
// b MN-major in shared memory (transposed: its core matrices' rows along K, 8 elements of N each).
__device__ __forceinline__ void multiplyAdd(float (&d)[8][4], const uint32_t (&a)[4], uint64_t b) {
  XTRAP_WGMMA_ASM(
      "{\n.reg .pred accumulate;\nsetp.ne.b32 accumulate, %37, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
      "{%32, %33, %34, %35}, %36, accumulate, 1, 1, 1;\n}\n"
      : XTRAP_WGMMA_ACCUMULATORS("+f", d)
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(1));
}

}  // namespace xtrap::cuda::wgmma

#undef XTRAP_WGMMA_ASM
#undef XTRAP_WGMMA_ACCUMULATORS
#undef XTRAP_WGMMA_SHARED_PRODUCT
