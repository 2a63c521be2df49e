#pragma once
// The feed-forward block's activation with its dropout on CUDA, one pass each way (activation_dropout.h):
//   out = dropout(act(h)),  act = GELU (erf), GELU (tanh approximation) or ReLU,
// in float32 from h's bf16 or float32 values, rounded once into h's dtype. LibTorch's operators
// take two passes and round twice (the activation, then dropout); their backward reads the
// activation's input and the dropout mask, here h alone: the mask is regenerated from the key
// (counter_dropout.h, element i of the flattened tensor). fc1's bias is already added by its
// matmul (torch::linear folds it into the GEMM's epilogue).
//   backward: dH = dOut * dropout's factor * act'(h)
// with act' as LibTorch's GELU and ReLU backward compute it (ReLU's is 0 where h <= 0, else 1, so
// a NaN h passes the gradient through).
//
// A plain C++ API over raw device pointers (no LibTorch): the LibTorch glue is activation_dropout_cuda.cpp.
#include <cuda_runtime_api.h>

#include <cstdint>

#include "model/counter_dropout.h"

namespace xtrap::cuda {

enum class ActivationKind { Gelu, GeluTanh, Relu };

struct ActivationDropoutArgs {
  int64_t n = 0;  // elements; n < 2^32 (dropout's element index)
  ActivationKind kind = ActivationKind::Gelu;
  bool bf16 = false;        // h, out, dOut and dH in bf16, else float32
  const void* h = nullptr;  // (n) contiguous, the activation's input
  CounterDropout dropout;
  void* out = nullptr;         // forward: (n) dropout(act(h))
  const void* dOut = nullptr;  // backward: (n) the output's gradient
  void* dH = nullptr;          // backward: (n) h's gradient
};

cudaError_t activationDropoutForward(const ActivationDropoutArgs& args, cudaStream_t stream);
cudaError_t activationDropoutBackward(const ActivationDropoutArgs& args, cudaStream_t stream);

}  // namespace xtrap::cuda
