#pragma once
// The random state a CUDA kernel with dropout takes, safe to capture in a CUDA graph: a raw mirror
// of PyTorch's at::PhiloxCudaState (no LibTorch here), filled by the LibTorch glue from the default
// CUDA generator (rng_state_torch.h) and resolved on the device (rng_state.cuh).
// Outside a graph capture the generator hands out (seed, offset) as values, and every call reserves
// a fresh offset. Inside one it hands out device pointers to the seed and to the offset that the
// graph's replays advance, and an offset within the graph: a kernel that took host values would
// replay one mask forever, one that reads the pointers gets a new mask per replay.
// The backward pass regenerates the forward's mask: the forward writes the (seed, offset) it
// resolved into a tiny (2) int64 device tensor, and the backward reads them back through the same
// pointer form (as flash-attention's backward reads its saved rng_state).
#include <cstdint>

namespace xtrap::cuda {

struct RngState {
  uint64_t seed = 0, offset = 0;       // the values, where !captured
  const int64_t* seedPtr = nullptr;    // where captured: the device's seed, read when the kernel runs
  const int64_t* offsetPtr = nullptr;  // and its offset, to which offsetIntragraph is added
  uint32_t offsetIntragraph = 0;
  bool captured = false;
};

}  // namespace xtrap::cuda
