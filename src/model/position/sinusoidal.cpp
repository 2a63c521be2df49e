#include "model/position/sinusoidal.h"

namespace xtrap {

torch::Tensor sinusoidalTable(int64_t T, int64_t d, const torch::TensorOptions& options) {
  auto doubles = options.dtype(torch::kFloat64);
  auto pos = torch::arange(T, doubles).unsqueeze(1);                              // (T, 1)
  auto freq = torch::pow(10000.0, -torch::arange(0, d, 2, doubles) / double(d));  // (d/2)
  auto table = torch::zeros({T, d}, doubles);
  auto angles = pos * freq;  // (T, ceil(d/2))
  table.index_put_({torch::indexing::Slice(), torch::indexing::Slice(0, d, 2)}, angles.sin());
  table.index_put_({torch::indexing::Slice(), torch::indexing::Slice(1, d, 2)}, angles.cos().narrow(1, 0, d / 2));
  return table.to(torch::kFloat32);
}

}  // namespace xtrap
