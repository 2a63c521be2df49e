#pragma once
// Counter-based dropout: element i of a tensor is kept when a hash of (key, i) is at least
// p * 2^32, and kept elements are multiplied by 1 / (1 - p). Nothing is stored: any pass that
// knows the key regenerates the mask, element by element, in any order and any blocking. The CPU's
// fastDropout (fast_dropout.h) and the fused CUDA kernels (add_norm.cu, activation_dropout.cu,
// embedding_dropout.cu) share these functions, so for the same key both give the same mask.
// Host and device code, no LibTorch.
#include <cstdint>

#include "cuda/rng_state.h"

#if defined(__CUDACC__)
#define XTRAP_HOST_DEVICE __host__ __device__
#else
#define XTRAP_HOST_DEVICE
#endif

namespace xtrap {

// murmur3's 32-bit finaliser over a Weyl sequence: independent-looking bits per element, and
// 32-bit multiplies vectorise (AVX2 has no 64-bit multiply). The key's halves enter as seedLo and
// seedHi.
XTRAP_HOST_DEVICE inline uint32_t hashIndex(uint32_t i, uint32_t seedLo, uint32_t seedHi) {
  uint32_t h = i * 0x9E3779B9u + seedLo;
  h ^= seedHi;
  h ^= h >> 16;
  h *= 0x85EBCA6Bu;
  h ^= h >> 13;
  h *= 0xC2B2AE35u;
  h ^= h >> 16;
  return h;
}

// The threshold of rate p: keep when hashIndex(...) >= it (probability 1 - p up to 2^-32).
inline uint32_t dropoutThreshold(double p) {
  return static_cast<uint32_t>(p <= 0 ? 0.0 : p >= 1 ? 4294967295.0 : p * 4294967296.0);
}

// The key of one CUDA dropout call from the generator's (seed, offset) (rng_state.h): splitmix64
// of both, so that calls whose offsets differ get unrelated masks (offsets that differ by a constant
// would otherwise only shift one Weyl sequence along the other).
XTRAP_HOST_DEVICE inline uint64_t dropoutKey(uint64_t seed, uint64_t offset) {
  uint64_t z = seed + (offset + 1) * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// What a fused kernel's dropout takes. p = 0: threshold 0 and scale 1 keep every element (and the
// random state is not read). The forward writes the (seed, offset) it resolved to `resolved`
// ((2) int64 on the device, or nullptr); the backward passes an rng that reads them back.
struct CounterDropout {
  uint32_t threshold = 0;
  float scale = 1.f;  // 1 / (1 - p) in float32, as fastDropout's
  cuda::RngState rng;
  int64_t* resolved = nullptr;
};

}  // namespace xtrap
