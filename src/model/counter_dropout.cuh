#pragma once
// A kernel's side of CounterDropout (counter_dropout.h): its key, resolved on the device, and the
// factor of one element.
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/rng_state.cuh"
#include "model/counter_dropout.h"

namespace xtrap::cuda {

// The key's two halves, as hashIndex takes them.
struct DropoutKey {
  uint32_t lo = 0, hi = 0;
};

// The key of `d` from its random state (the seed and offset recorded in d.resolved); none read at p = 0.
__device__ __forceinline__ DropoutKey dropoutKeyOf(const CounterDropout& d) {
  if (d.threshold == 0) return {};
  uint64_t seed = 0, offset = 0;
  resolveRng(d.rng, d.resolved, seed, offset);
  const uint64_t key = dropoutKey(seed, offset);
  return {uint32_t(key), uint32_t(key >> 32)};
}

// What element i is multiplied by: 1 / (1 - p) where kept, else 0 (a multiply, so that NaN and inf
// still propagate, as fastDropout's).
__device__ __forceinline__ float dropFactor(const CounterDropout& d, DropoutKey key, uint32_t i) {
  return hashIndex(i, key.lo, key.hi) >= d.threshold ? d.scale : 0.f;
}

}  // namespace xtrap::cuda
