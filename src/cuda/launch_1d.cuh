#pragma once
// A 1-D launch of `blocks` blocks of `threads` threads through cudaLaunchKernelEx rather than
// <<<...>>>, so that a kernel file also compiles as plain C++ (tests/cuda_emulation runs its
// kernels on the CPU).
#include <cuda_runtime.h>

#include <cstdint>
#include <utility>

namespace xtrap::cuda {

template <typename... Params, typename... Args>
cudaError_t launch1d(void (*kernel)(Params...), int64_t blocks, int threads, cudaStream_t stream, Args&&... args) {
  if (blocks <= 0) return cudaSuccess;
  if (blocks > int64_t(0x7fffffff)) return cudaErrorInvalidConfiguration;
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(unsigned(blocks));
  config.blockDim = dim3(unsigned(threads));
  config.stream = stream;
  return cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...);
}

}  // namespace xtrap::cuda
