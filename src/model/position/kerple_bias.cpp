#include "model/position/kerple_bias.h"

namespace xtrap {

KerpleLogBias::KerpleLogBias(int64_t heads) {
  // Made on the CPU in float32, seeded by the model's init seed (the model moves them with place()).
  r1_ = register_parameter("r1", torch::rand({heads}) * 2.0);
  r2_ = register_parameter("r2", torch::rand({heads}));
  constrainParameters();
}

void KerpleLogBias::constrainParameters() {
  torch::NoGradGuard noGrad;
  r1_.clamp_min_(kMinimum);
  r2_.clamp_min_(kMinimum);
}

torch::Tensor KerpleLogBias::block(int64_t q0, int64_t q1, int64_t k0, int64_t k1) {
  auto floats = r1_.options();  // the parameters' device and precision
  return atPositions(torch::arange(q0, q1, floats), torch::arange(k0, k1, floats));
}

torch::Tensor KerpleLogBias::atPositions(const torch::Tensor& queryPositions, const torch::Tensor& keyPositions) {
  auto floats = r1_.options();
  auto i = queryPositions.to(floats).unsqueeze(1);
  auto j = keyPositions.to(floats).unsqueeze(0);
  auto distance = (i - j).abs();  // (Tq, Tk)
  int64_t H = r1_.size(0);
  return -r1_.view({H, 1, 1}) * torch::log1p(r2_.view({H, 1, 1}) * distance);  // (H, Tq, Tk)
}

}  // namespace xtrap
