#pragma once
// CounterDropout (counter_dropout.h) for the fused kernels' CUDA glue: the forward's, from the
// default CUDA generator, with the (2) int64 tensor it records its seed and offset in, and the
// backward's, reading them back. Compiled only where LibTorch has CUDA.
#include <torch/torch.h>

#include "cuda/rng_state_torch.h"
#include "model/counter_dropout.h"

namespace xtrap {

// Rate p; the random state is drawn only where p > 0 (resolved then (2) int64 on `device`, else
// undefined).
struct ForwardDropout {
  CounterDropout dropout;
  torch::Tensor resolved;
};
inline ForwardDropout forwardDropout(double p, const torch::Device& device) {
  ForwardDropout f;
  if (p <= 0) return f;
  f.dropout.threshold = dropoutThreshold(p);
  f.dropout.scale = static_cast<float>(1.0 / (1.0 - p));
  f.dropout.rng = drawRngState(device);
  f.resolved = torch::empty({2}, torch::TensorOptions(device).dtype(torch::kInt64));
  f.dropout.resolved = f.resolved.data_ptr<int64_t>();
  return f;
}

// The same mask again in the backward, from the forward's `resolved` (undefined where p = 0).
inline CounterDropout backwardDropout(double p, const torch::Tensor& resolved) {
  CounterDropout d;
  if (p <= 0) return d;
  d.threshold = dropoutThreshold(p);
  d.scale = static_cast<float>(1.0 / (1.0 - p));
  d.rng = savedRngState(resolved);
  return d;
}

}  // namespace xtrap
