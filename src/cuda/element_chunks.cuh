#pragma once
// Chunks of 8 consecutive elements of a float32 or bf16 tensor as 8 floats, for the elementwise
// kernels (add_norm.cu, activation_dropout.cu, embedding_dropout.cu): one 16-byte load or store of
// bf16, two of float32, where the chunk is 16-byte aligned; else element by element (the caller
// says which). bf16 stores round to nearest even.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/bf16_words.cuh"

namespace xtrap::cuda {

constexpr int kChunk = 8;

__device__ __forceinline__ bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// v[k] = p[k] for k < n (n <= 8); whole: n == 8 and p 16-byte aligned.
__device__ __forceinline__ void loadChunk(const float* p, float (&v)[kChunk], int n, bool whole) {
  if (whole) {
    const float4 a = reinterpret_cast<const float4*>(p)[0], b = reinterpret_cast<const float4*>(p)[1];
    v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
    return;
  }
  for (int k = 0; k < n; ++k) v[k] = p[k];
}
__device__ __forceinline__ void loadChunk(const __nv_bfloat16* p, float (&v)[kChunk], int n, bool whole) {
  if (whole) {
    const uint4 w = *reinterpret_cast<const uint4*>(p);
    const uint32_t words[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
    for (int k = 0; k < 4; ++k) v[2 * k] = lowBf16(words[k]), v[2 * k + 1] = highBf16(words[k]);
    return;
  }
  for (int k = 0; k < n; ++k) v[k] = __bfloat162float(p[k]);
}

// p[k] = v[k] for k < n.
__device__ __forceinline__ void storeChunk(float* p, const float (&v)[kChunk], int n, bool whole) {
  if (whole) {
    reinterpret_cast<float4*>(p)[0] = make_float4(v[0], v[1], v[2], v[3]);
    reinterpret_cast<float4*>(p)[1] = make_float4(v[4], v[5], v[6], v[7]);
    return;
  }
  for (int k = 0; k < n; ++k) p[k] = v[k];
}
__device__ __forceinline__ void storeChunk(__nv_bfloat16* p, const float (&v)[kChunk], int n, bool whole) {
  if (whole) {
    *reinterpret_cast<uint4*>(p) =
        make_uint4(bf16Word(v[0], v[1]), bf16Word(v[2], v[3]), bf16Word(v[4], v[5]), bf16Word(v[6], v[7]));
    return;
  }
  for (int k = 0; k < n; ++k) p[k] = __float2bfloat16(v[k]);
}

}  // namespace xtrap::cuda
