#pragma once
// A kernel's side of RngState (rng_state.h): the (seed, offset) it stands for, read on the device,
// as at::cuda::philox::unpack does.
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/rng_state.h"

namespace xtrap::cuda {

// (seed, offset) of `rng`; thread (0, 0, 0) of block (0, 0, 0) also writes them into
// resolved[0..1] when resolved is not nullptr (the forward's record for its backward). Every thread may call it: a
// captured state is one broadcast load of two int64.
__device__ __forceinline__ void resolveRng(const RngState& rng, int64_t* resolved, uint64_t& seed, uint64_t& offset) {
  if (rng.captured) {
    seed = uint64_t(*rng.seedPtr);
    offset = uint64_t(*rng.offsetPtr) + rng.offsetIntragraph;
  } else {
    seed = rng.seed;
    offset = rng.offset;
  }
  if (resolved && blockIdx.x == 0 && blockIdx.y == 0 && blockIdx.z == 0 && threadIdx.x == 0 && threadIdx.y == 0 &&
      threadIdx.z == 0) {
    resolved[0] = int64_t(seed);
    resolved[1] = int64_t(offset);
  }
}

}  // namespace xtrap::cuda
