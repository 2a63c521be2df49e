#include "model/position/rotary.h"

#ifdef XTRAP_WITH_CUDA_KERNELS
#include "model/position/rotary_cuda.h"
#endif

namespace xtrap {

const Rotary::Tables& Rotary::tables(int64_t T, int64_t D, int64_t offset, torch::Device device,
                                     torch::ScalarType dtype) const {
  const Tables* t = tableCache ? &*tableCache : nullptr;
  if (t && t->T == T && t->D == D && t->offset == offset && t->base == base && t->positionScale == positionScale &&
      t->frequencyFactors == frequencyFactors && t->device == device && t->dtype == dtype)
    return *t;
  // Angles in float64, then cos and sin in `dtype`: a bfloat16 angle at position 900 would be off
  // by up to 2 radians (8 significant bits).
  auto doubles = torch::TensorOptions().dtype(torch::kFloat64).device(device);
  auto inv = torch::pow(base, -torch::arange(0, D, 2, doubles) / double(D));  // (D/2)
  if (!frequencyFactors.empty()) inv = inv * torch::tensor(frequencyFactors, doubles);
  auto pos = (torch::arange(offset, offset + T, doubles) / positionScale).unsqueeze(1);
  auto angles = (pos * inv).to(dtype);  // (T, D/2): pair p's angle at each position
  tableCache = Tables{T, D, offset, base, positionScale, frequencyFactors, device, dtype, angles.cos(), angles.sin()};
  return *tableCache;
}

torch::Tensor Rotary::apply(const torch::Tensor& x, int64_t offset) const {
  int64_t T = x.size(2), D = x.size(3);
  // The rotation in float32 (float64 for a float64 x), cast to x's precision only at the end.
  auto compute = x.scalar_type() == torch::kFloat64 ? torch::kFloat64 : torch::kFloat32;
  const Tables& t = tables(T, D, offset, x.device(), compute);
#ifdef XTRAP_WITH_CUDA_KERNELS
  // bf16 on a GPU: one pass of the kernel, the same rounding steps as below (rotary.cuh).
  if (fusedRotaryTakes(x)) return fusedRotary(x, t.cos, t.sin, attentionFactor);
#endif
  auto cos = torch::cat({t.cos, t.cos}, 1), sin = torch::cat({t.sin, t.sin}, 1);  // (T, D): both halves of a pair
  auto xf = x.to(compute);
  auto half1 = xf.narrow(3, 0, D / 2), half2 = xf.narrow(3, D / 2, D / 2);
  auto rotated = torch::cat({-half2, half1}, 3);
  auto out = xf * cos + rotated * sin;
  if (attentionFactor != 1.0) out = out * attentionFactor;
  return out.to(x.scalar_type());
}

}  // namespace xtrap
