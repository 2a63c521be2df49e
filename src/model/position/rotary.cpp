#include "model/position/rotary.h"

namespace xtrap {

torch::Tensor Rotary::apply(const torch::Tensor& x, int64_t offset) const {
  int64_t T = x.size(2), D = x.size(3);
  auto inv = torch::pow(base, -torch::arange(0, D, 2, torch::kFloat64) / double(D));  // (D/2)
  auto pos = (torch::arange(offset, offset + T, torch::kFloat64) / positionScale).unsqueeze(1);
  auto angles = torch::cat({pos * inv, pos * inv}, 1).to(x.scalar_type());  // (T, D)
  auto cos = angles.cos(), sin = angles.sin();
  auto half1 = x.narrow(3, 0, D / 2), half2 = x.narrow(3, D / 2, D / 2);
  auto rotated = torch::cat({-half2, half1}, 3);
  return x * cos + rotated * sin;
}

}  // namespace xtrap
