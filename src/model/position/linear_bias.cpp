#include "model/position/linear_bias.h"

#include <algorithm>
#include <limits>

namespace xtrap {
namespace {
// Parameters are made on the CPU in float32 (the model moves them with place()).
const auto kHostFloats = torch::TensorOptions(torch::kFloat32);

torch::Tensor toTensor(const std::vector<double>& v, const torch::TensorOptions& options) {
  return torch::tensor(std::vector<float>(v.begin(), v.end()), options.dtype(torch::kFloat32));
}
torch::Tensor toBoolTensor(const std::vector<bool>& v) {
  std::vector<uint8_t> b(v.begin(), v.end());
  return torch::tensor(b, torch::TensorOptions(torch::kUInt8)).to(torch::kBool);
}
}  // namespace

LinearBias::LinearBias(LinearBiasSpec spec, bool learnedInitRandom) : spec_(std::move(spec)) {
  int64_t H = spec_.heads();
  torch::Tensor past = toTensor(spec_.slopePast, kHostFloats), future = toTensor(spec_.slopeFuture, kHostFloats);
  if (spec_.learnedSlopes) {
    if (learnedInitRandom) {
      past = torch::randn({H}, kHostFloats) - 2.0;  // seeded by the model's init seed
      future = torch::randn({H}, kHostFloats) - 2.0;
    } else {
      past = torch::logit(past);
      future = torch::logit(future);
    }
    pastParam_ = register_parameter("slope_past_logit", past);
    futureParam_ = register_parameter("slope_future_logit", future);
  } else {
    pastParam_ = register_buffer("slope_past", past);
    futureParam_ = register_buffer("slope_future", future);
  }
  if (spec_.hasFirstTokenBias) firstTokenBias_ = register_parameter("first_token_bias", torch::zeros({H}, kHostFloats));
  pastDivisors_ = torch::ones({H}, kHostFloats);
  futureDivisors_ = torch::ones({H}, kHostFloats);
  blockPast_ = toBoolTensor(spec_.blockPast);
  blockFuture_ = toBoolTensor(spec_.blockFuture);
}

const torch::Tensor& LinearBias::onParameterDevice(torch::Tensor& constant) const {
  if (constant.device() != pastParam_.device()) constant = constant.to(pastParam_.device());
  return constant;
}

bool LinearBias::blocksFuture() const {
  return std::all_of(spec_.blockFuture.begin(), spec_.blockFuture.end(), [](bool b) { return b; });
}

torch::Tensor LinearBias::slopePast() const {
  return (spec_.learnedSlopes ? torch::sigmoid(pastParam_) : pastParam_) / onParameterDevice(pastDivisors_);
}
torch::Tensor LinearBias::slopeFuture() const {
  return (spec_.learnedSlopes ? torch::sigmoid(futureParam_) : futureParam_) / onParameterDevice(futureDivisors_);
}

void LinearBias::setSlopeDivisors(const std::vector<double>& past, const std::vector<double>& future) {
  TORCH_CHECK(
      static_cast<int64_t>(past.size()) == spec_.heads() && static_cast<int64_t>(future.size()) == spec_.heads(),
      "one divisor per head and direction");
  pastDivisors_ = toTensor(past, pastParam_.options());
  futureDivisors_ = toTensor(future, pastParam_.options());
}

torch::Tensor LinearBias::block(int64_t q0, int64_t q1, int64_t k0, int64_t k1) {
  auto floats = pastParam_.options().dtype(torch::kFloat32);
  auto i = torch::arange(q0, q1, floats), j = torch::arange(k0, k1, floats);
  auto bias = atPositions(i, j);  // (H, Tq, Tk)
  if (!spec_.hasFirstTokenBias) return bias;
  // The learned bias replaces the distance term of pairs with the first token (linear_bias_spec.h).
  auto touchesFirst = (i.unsqueeze(1) == 0) | (j.unsqueeze(0) == 0);  // (Tq, Tk)
  return torch::where(touchesFirst, firstTokenBias_.view({spec_.heads(), 1, 1}).expand_as(bias), bias);
}

torch::Tensor LinearBias::atPositions(const torch::Tensor& queryPositions, const torch::Tensor& keyPositions) {
  // d = j - i over the block: (Tq, Tk)
  auto floats = pastParam_.options().dtype(torch::kFloat32);
  auto i = queryPositions.to(floats).unsqueeze(1);
  auto j = keyPositions.to(floats).unsqueeze(0);
  auto d = j - i;
  auto pastDistance = (-d).clamp_min(0.0);                       // i - j where j < i, else 0
  auto futureDistance = (d - spec_.futureShift).clamp_min(0.0);  // j - i - shift where j > i
  int64_t H = spec_.heads();
  auto bias =
      -(slopePast().view({H, 1, 1}) * pastDistance + slopeFuture().view({H, 1, 1}) * futureDistance);  // (H, Tq, Tk)
  auto blocked = (onParameterDevice(blockPast_).view({H, 1, 1}) & (d < 0)) |
                 (onParameterDevice(blockFuture_).view({H, 1, 1}) & (d > 0));
  return bias.masked_fill(blocked, -std::numeric_limits<float>::infinity());
}

}  // namespace xtrap
