#include "model/position/rotary.h"

#include <stdexcept>

#ifdef XTRAP_WITH_CUDA_KERNELS
#include "model/position/rotary_cuda.h"
#endif

namespace xtrap {

Rotary Rotary::make(int64_t headDim, int64_t rotaryDim, double base, RopeScaling scaling) {
  if (rotaryDim < 2 || rotaryDim % 2 || rotaryDim > headDim)
    throw std::invalid_argument("rotary: the rotated channels must be even, >= 2 and <= the head dim " +
                                std::to_string(headDim) + ", got " + std::to_string(rotaryDim));
  if (!(base > 1)) throw std::invalid_argument("rotary: the base must be > 1, got " + std::to_string(base));
  scaling.validate(rotaryDim);
  Rotary r{headDim, base};
  r.rotaryDim = rotaryDim;
  r.scaling = std::move(scaling);
  return r;
}

const Rotary::Tables& Rotary::tables(int64_t T, int64_t offset, torch::Device device, torch::ScalarType dtype) const {
  const int64_t d = rotated();
  const Tables* t = tableCache ? &*tableCache : nullptr;
  // T and offset stand for the window's length, which dynamic and longrope frequencies follow.
  if (t && t->T == T && t->d == d && t->offset == offset && t->base == base && t->positionScale == positionScale &&
      t->frequencyFactors == frequencyFactors && t->scaling == scaling && t->device == device && t->dtype == dtype)
    return *t;
  // Angles in float64, then cos and sin in `dtype`: a bfloat16 angle at position 900 would be off
  // by up to 2 radians (8 significant bits). transformers rounds the frequencies and angles to
  // float32 first; its CPU and GPU already differ by an ulp there (pow), as much as this does.
  auto doubles = torch::TensorOptions().dtype(torch::kFloat64).device(device);
  auto pos = torch::arange(offset, offset + T, doubles);
  auto [cos, sin] = cosSin(pos, offset + T, dtype);
  tableCache = Tables{T, d, offset, base, positionScale, frequencyFactors, scaling, device, dtype, cos, sin};
  return *tableCache;
}

std::pair<torch::Tensor, torch::Tensor> Rotary::cosSin(const torch::Tensor& positions, int64_t windowLength,
                                                       torch::ScalarType dtype) const {
  const int64_t d = rotated();
  auto doubles = positions.options().dtype(torch::kFloat64);
  // The default frequencies on the device: no host copy, which a captured CUDA graph cannot hold.
  auto inv = scaling.isDefault()
                 ? torch::pow(base, -torch::arange(0, d, 2, doubles) / double(d))
                 : torch::tensor(ropeInverseFrequencies(scaling, base, d, windowLength), doubles.device(torch::kCPU))
                       .to(positions.device());  // (d/2)
  if (!frequencyFactors.empty()) inv = inv * torch::tensor(frequencyFactors, doubles);
  auto pos = (positions.to(torch::kFloat64) / positionScale).unsqueeze(1);
  auto angles = (pos * inv).to(dtype);  // (T, d/2): pair p's angle at each position
  auto cos = angles.cos(), sin = angles.sin();
  // transformers multiplies cos and sin (float32) by the factor.
  if (double af = ropeAttentionFactor(scaling); af != 1.0) cos = cos * af, sin = sin * af;
  return {cos, sin};
}

torch::Tensor Rotary::rotateBy(const torch::Tensor& x, const torch::Tensor& cosHalf, const torch::Tensor& sinHalf,
                               torch::ScalarType compute) const {
  const int64_t d = x.size(3);
  auto cos = torch::cat({cosHalf, cosHalf}, 1),
       sin = torch::cat({sinHalf, sinHalf}, 1);  // (T, d): both halves of a pair
  auto xf = x.to(compute);
  auto half1 = xf.narrow(3, 0, d / 2), half2 = xf.narrow(3, d / 2, d / 2);
  auto rotated = torch::cat({-half2, half1}, 3);
  auto out = xf * cos + rotated * sin;
  if (attentionFactor != 1.0) out = out * attentionFactor;
  return out.to(x.scalar_type());
}

torch::Tensor Rotary::rotate(const torch::Tensor& x, int64_t offset) const {
  const int64_t T = x.size(2);
  // The rotation in float32 (float64 for a float64 x), cast to x's precision only at the end.
  auto compute = x.scalar_type() == torch::kFloat64 ? torch::kFloat64 : torch::kFloat32;
  const Tables& t = tables(T, offset, x.device(), compute);
#ifdef XTRAP_WITH_CUDA_KERNELS
  // bf16 on a GPU: one pass of the kernel, the same rounding steps as below (rotary.cuh).
  if (fusedRotaryTakes(x)) return fusedRotary(x, t.cos, t.sin, attentionFactor);
#endif
  return rotateBy(x, t.cos, t.sin, compute);
}

torch::Tensor Rotary::withPassThrough(const torch::Tensor& x,
                                      const std::function<torch::Tensor(const torch::Tensor&)>& turn) const {
  const int64_t D = x.size(3), d = rotated();
  if (d == D) return turn(x);
  // Partial rotary: the first d channels turn, the rest pass through unchanged.
  return torch::cat({turn(x.narrow(3, 0, d)), x.narrow(3, d, D - d)}, 3);  // (B, H, T, D)
}

torch::Tensor Rotary::apply(const torch::Tensor& x, int64_t offset) const {
  return withPassThrough(x, [&](const torch::Tensor& part) { return rotate(part, offset); });
}

torch::Tensor Rotary::applyAt(const torch::Tensor& x, const torch::Tensor& positions, int64_t windowLength) const {
  auto compute = x.scalar_type() == torch::kFloat64 ? torch::kFloat64 : torch::kFloat32;
  auto [cos, sin] = cosSin(positions.to(x.device()), windowLength, compute);
  return withPassThrough(x, [&](const torch::Tensor& part) { return rotateBy(part, cos, sin, compute); });
}

}  // namespace xtrap
