#pragma once
// Warp-level bf16 tensor-core operations whose register layout is documented (PTX ISA, "Matrix
// Fragments for mma.m16n8k16 with floating point type" and "ldmatrix"): the fused attention kernels
// keep S, P, dS and their accumulators in registers and compute the bias of each cell there, which
// needs to know which lane holds which element. WMMA leaves that unspecified.
// tests/cuda_emulation/include/cuda/warp_mma.cuh is this file's CPU twin, written from
// the same pages; the kernels include this one by the same name.
//
// Lane l of a warp: g = l / 4 (its group), t = l % 4 (its place in the group). Registers hold two
// bf16 each, the element of the lower column (or row, in B) in the lower 16 bits.
//   A (16 x 16):      a[0] = A[g][2t, 2t+1]    a[1] = A[g+8][2t, 2t+1]
//                     a[2] = A[g][2t+8, 2t+9]  a[3] = A[g+8][2t+8, 2t+9]
//   B (16 x 8):       b0 = B[2t, 2t+1][g]      b1 = B[2t+8, 2t+9][g]
//   C, D (16 x 8, fp32): c[0], c[1] = C[g][2t, 2t+1]   c[2], c[3] = C[g+8][2t, 2t+1]
#include <cuda_bf16.h>

#include <cstdint>

namespace xtrap::cuda::mma {

// d += a b: mma.sync m16n8k16, bf16 inputs, fp32 accumulation.
__device__ __forceinline__ void multiplyAdd(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// ldmatrix .x4: four 8 x 8 bf16 matrices from shared memory. Lane l passes the address of row l % 8
// of matrix l / 8 (16-byte aligned: the row's 8 elements); r[m] receives row g, columns 2t and
// 2t + 1 of matrix m. The "memory" clobber keeps the compiler from moving the read across the
// kernel's own shared-memory stores.
__device__ __forceinline__ void loadMatrices(uint32_t (&r)[4], const __nv_bfloat16* row) {
  const unsigned address = static_cast<unsigned>(__cvta_generic_to_shared(row));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address)
               : "memory");
}

// The same with .trans: r[m] receives column g, rows 2t and 2t + 1 of matrix m.
__device__ __forceinline__ void loadMatricesTransposed(uint32_t (&r)[4], const __nv_bfloat16* row) {
  const unsigned address = static_cast<unsigned>(__cvta_generic_to_shared(row));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address)
               : "memory");
}

// lo and hi rounded to bf16 (to nearest even) in one register, lo in the lower half.
__device__ __forceinline__ uint32_t packBf16(float lo, float hi) {
  const __nv_bfloat162 pair = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&pair);
}

}  // namespace xtrap::cuda::mma
