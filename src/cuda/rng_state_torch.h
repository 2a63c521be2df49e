#pragma once
// RngState (rng_state.h) from LibTorch's default CUDA generator, for the CUDA glue. Compiled only
// where LibTorch has CUDA.
#include <ATen/cuda/CUDAGeneratorImpl.h>
#include <torch/torch.h>

#include <cstdint>
#include <mutex>

#include "cuda/rng_state.h"

namespace xtrap {

// The state of one call on `device`'s default generator, reserving `increment` of its Philox
// offset (a multiple of 4, as PyTorch asks), exactly as PyTorch's own dropout takes it: values
// outside a graph capture, the graph's device pointers inside one.
inline cuda::RngState drawRngState(const torch::Device& device, uint64_t increment = 4) {
  auto gen = at::cuda::detail::getDefaultCUDAGenerator(device.index());
  at::PhiloxCudaState philox;
  {
    std::lock_guard<std::mutex> lock(gen.mutex());
    philox = gen.get<at::CUDAGeneratorImpl>()->philox_cuda_state(increment);
  }
  cuda::RngState state;
  if (philox.captured_) {
    state.captured = true;
    state.seedPtr = philox.seed_.ptr;
    state.offsetPtr = philox.offset_.ptr;
    state.offsetIntragraph = philox.offset_intragraph_;
  } else {
    state.seed = philox.seed_.val;
    state.offset = philox.offset_.val;
  }
  return state;
}

// The state a forward resolved into `resolved` ((2) int64 on the GPU: seed, offset), read back on
// the device (the captured form, offset within the graph 0), for the backward.
inline cuda::RngState savedRngState(const torch::Tensor& resolved) {
  cuda::RngState state;
  state.captured = true;
  state.seedPtr = resolved.data_ptr<int64_t>();
  state.offsetPtr = state.seedPtr + 1;
  return state;
}

}  // namespace xtrap
