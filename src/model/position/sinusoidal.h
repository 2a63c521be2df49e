#pragma once
// Vaswani et al.'s fixed position encoding, added to the (scaled) token embeddings:
//   PE(pos, 2k) = sin(pos / 10000^(2k/d)),  PE(pos, 2k+1) = cos(pos / 10000^(2k/d)).
#include <torch/torch.h>

namespace xtrap {

// (T, d) float32 on `options`' device.
torch::Tensor sinusoidalTable(int64_t T, int64_t d, const torch::TensorOptions& options);

}  // namespace xtrap
