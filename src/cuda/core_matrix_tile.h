#pragma once
// A 64-row bf16 tile in shared memory as Hopper's warpgroup MMA reads it without swizzling
// (warpgroup_mma.cuh), and the 64-bit descriptor that tells wgmma.mma_async where it lies. Written
// once for both compilers: nvcc builds it into the fused attention kernel, g++ into the torch-free
// test of the descriptor's bits (tests/test_linear_bias_tile.cpp). No CUDA headers here.
//
// PTX ISA, "Shared Memory Matrix Layout" and "Matrix Descriptor Format" of wgmma: without
// swizzling an operand is made of core matrices, 8 rows of 16 contiguous bytes (8 bf16) each, 128
// contiguous bytes; the descriptor gives two strides between core matrices. CUTLASS's
// make_gmma_desc (cute/atom/mma_traits_sm90_gmma.hpp, LayoutType::INTERLEAVE) reads them so:
//   K-major (not transposed: rows along M or N, the 8 elements of a row along K):
//     leading byte offset = between core matrices adjacent in K, stride byte offset = in M or N;
//   MN-major (transposed: the 8 elements of a row along M or N, rows along K):
//     leading byte offset = between core matrices adjacent in K, stride byte offset = in M or N.
//
// The tile here: (64 rows, D) with core matrix (row group g = row / 8, chunk c = column / 8) at
// byte 128 (8 c + g). A token's row of q, k or v is a row of the tile, so the same bytes are
//   - a K-major operand over the head dimension (S = Q K^T: A = Q, B = K): leading offset
//     kChunkBytes (next 8 columns), stride offset kRowGroupBytes (next 8 tokens);
//   - an MN-major operand over the tokens (O += P V: B = V, K = keys, N = D; AtomicDq's dQ += dS K
//     reads its dS^T tile so as A): leading offset kRowGroupBytes (next 8 tokens), stride offset
//     kChunkBytes (next 8 columns).
#include <cstdint>

#ifdef __CUDACC__
#define XTRAP_CORE_HD __host__ __device__ __forceinline__
#else
#define XTRAP_CORE_HD inline
#endif

namespace xtrap::cuda::core {

constexpr int kRows = 64;                          // a tile's rows: one warpgroup MMA's M
constexpr uint32_t kRowGroupBytes = 128;           // a core matrix
constexpr uint32_t kChunkBytes = kRows / 8 * 128;  // the 8 core matrices of one 8-column chunk

// The element offset of (row, column) in a tile of 64 rows.
XTRAP_CORE_HD constexpr int offset(int row, int column) {
  return (column / 8 * 8 + row / 8) * 64 + row % 8 * 8 + column % 8;
}

// The descriptor of a matrix without swizzling that starts at shared-memory address `address`
// (the shared window's, 16-byte aligned): bits [0, 14) address / 16, [16, 30) leadingBytes / 16,
// [32, 46) strideBytes / 16; base offset (bits 49-51) and layout type (bits 62-63, 0: no
// swizzle) zero.
XTRAP_CORE_HD constexpr uint64_t descriptor(uint32_t address, uint32_t leadingBytes, uint32_t strideBytes) {
  return uint64_t((address >> 4) & 0x3FFFu) | (uint64_t((leadingBytes >> 4) & 0x3FFFu) << 16) |
         (uint64_t((strideBytes >> 4) & 0x3FFFu) << 32);
}

// The same matrix's descriptor `elements` bf16 further on (a multiple of 8): its start address
// field plus elements * 2 / 16, the other fields unchanged while the address stays in the field's
// 2^18 bytes (shared memory is at most 228 KiB). One add a k-step where a whole descriptor would be
// four instructions again (CUTLASS's descriptor iterator does the same).
XTRAP_CORE_HD constexpr uint64_t advanced(uint64_t descriptor, int elements) {
  return descriptor + uint64_t(elements / 8);
}

}  // namespace xtrap::cuda::core
