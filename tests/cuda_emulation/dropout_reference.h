#pragma once
// counter_dropout.h's mask written out again, for the emulated kernels' tests: element i of a call
// whose generator state is (seed, offset) is kept when murmur3's 32-bit finaliser of
// i * 0x9E3779B9 + lo(key), xored with hi(key), is at least p * 2^32, the key being splitmix64's
// output for seed + (offset + 1) * 0x9E3779B97F4A7C15; kept elements are scaled by float(1 / (1 - p)).
#include <cstdint>

namespace dropout_reference {

inline uint64_t key(uint64_t seed, uint64_t offset) {
  uint64_t z = seed + (offset + 1) * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

inline bool kept(uint64_t key, uint64_t i, double p) {
  uint32_t h = uint32_t(i) * 0x9E3779B9u + uint32_t(key);
  h ^= uint32_t(key >> 32);
  h ^= h >> 16;
  h *= 0x85EBCA6Bu;
  h ^= h >> 13;
  h *= 0xC2B2AE35u;
  h ^= h >> 16;
  return double(h) >= p * 4294967296.0;
}

// What element i is multiplied by.
inline float factor(uint64_t key, uint64_t i, double p) { return kept(key, i, p) ? float(1.0 / (1.0 - p)) : 0.f; }

}  // namespace dropout_reference
