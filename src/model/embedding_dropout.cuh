#pragma once
// The embedding's scale, position add and dropout on CUDA, one pass each way (embedding_dropout.h):
//   out = dropout(embedding * scale + positions[t])           (B, T, C) float32
// with positions a (T, C) table (sinusoidal or learned) or none, in the order of LibTorch's
// operators (the product, the sum, then dropout's factor, each rounded to float32), which take a
// pass each. Dropout is counter_dropout.h's, element (b T + t) C + c.
//   backward: dEmbedding = dOut * dropout's factor * scale,  dPositions[t] = sum_b dOut * factor
// the sum over b in order (the same bits run to run).
//
// A plain C++ API over raw device pointers (no LibTorch): the LibTorch glue is embedding_dropout_cuda.cpp.
// Every tensor float32 and contiguous.
#include <cuda_runtime_api.h>

#include <cstdint>

#include "model/counter_dropout.h"

namespace xtrap::cuda {

struct EmbeddingDropoutArgs {
  int64_t batch = 0, length = 0, cols = 0;  // B, T, C; B T C < 2^32 (dropout's element index)
  float scale = 1.f;
  const float* positions = nullptr;  // (T, C) or nullptr
  CounterDropout dropout;
  const float* embedding = nullptr;  // forward: (B, T, C)
  float* out = nullptr;              // forward: (B, T, C)
  const float* dOut = nullptr;       // backward: (B, T, C)
  float* dEmbedding = nullptr;       // backward: (B, T, C)
  float* dPositions = nullptr;       // backward: (T, C), or nullptr for none
};

cudaError_t embeddingDropoutForward(const EmbeddingDropoutArgs& args, cudaStream_t stream);
cudaError_t embeddingDropoutBackward(const EmbeddingDropoutArgs& args, cudaStream_t stream);

}  // namespace xtrap::cuda
