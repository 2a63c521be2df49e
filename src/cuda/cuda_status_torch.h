#pragma once
// A kernel launcher's cudaError_t as a LibTorch error, for the CUDA glue. Compiled only where
// LibTorch has CUDA.
#include <cuda_runtime.h>
#include <torch/torch.h>

namespace xtrap {

// Throws c10::Error "<what>: <CUDA's message>" unless `status` is cudaSuccess; `what` names the
// operation and its pass ("add & norm on CUDA, forward").
inline void checkCudaStatus(cudaError_t status, const char* what) {
  TORCH_CHECK(status == cudaSuccess, what, ": ", cudaGetErrorString(status));
}

}  // namespace xtrap
