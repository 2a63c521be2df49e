#include "model/position/linear_bias.h"

#include <limits>

namespace xtrap {
namespace {
torch::Tensor toTensor(const std::vector<double>& v) {
  return torch::tensor(std::vector<float>(v.begin(), v.end()), torch::kFloat32);
}
torch::Tensor toBoolTensor(const std::vector<bool>& v) {
  std::vector<uint8_t> b(v.begin(), v.end());
  return torch::tensor(b, torch::kUInt8).to(torch::kBool);
}
}  // namespace

LinearBias::LinearBias(LinearBiasSpec spec, bool learnedInitRandom) : spec_(std::move(spec)) {
  int64_t H = spec_.heads();
  torch::Tensor past = toTensor(spec_.slopePast), future = toTensor(spec_.slopeFuture);
  if (spec_.learnedSlopes) {
    if (learnedInitRandom) {
      past = torch::randn({H}) - 2.0;  // seeded by the model's init seed
      future = torch::randn({H}) - 2.0;
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
  if (spec_.hasFirstTokenBias) firstTokenBias_ = register_parameter("first_token_bias", torch::zeros({H}));
  pastDivisors_ = torch::ones({H});
  futureDivisors_ = torch::ones({H});
  blockPast_ = toBoolTensor(spec_.blockPast);
  blockFuture_ = toBoolTensor(spec_.blockFuture);
}

torch::Tensor LinearBias::slopePast() const {
  return (spec_.learnedSlopes ? torch::sigmoid(pastParam_) : pastParam_) / pastDivisors_;
}
torch::Tensor LinearBias::slopeFuture() const {
  return (spec_.learnedSlopes ? torch::sigmoid(futureParam_) : futureParam_) / futureDivisors_;
}

void LinearBias::setSlopeDivisors(const std::vector<double>& past, const std::vector<double>& future) {
  TORCH_CHECK(
      static_cast<int64_t>(past.size()) == spec_.heads() && static_cast<int64_t>(future.size()) == spec_.heads(),
      "one divisor per head and direction");
  pastDivisors_ = toTensor(past);
  futureDivisors_ = toTensor(future);
}

torch::Tensor LinearBias::block(int64_t q0, int64_t q1, int64_t k0, int64_t k1) {
  // d = j - i over the block: (Tq, Tk)
  auto i = torch::arange(q0, q1, torch::kFloat32).unsqueeze(1);
  auto j = torch::arange(k0, k1, torch::kFloat32).unsqueeze(0);
  auto d = j - i;
  auto pastDistance = (-d).clamp_min(0.0);                       // i - j where j < i, else 0
  auto futureDistance = (d - spec_.futureShift).clamp_min(0.0);  // j - i - shift where j > i
  int64_t H = spec_.heads();
  auto bias =
      -(slopePast().view({H, 1, 1}) * pastDistance + slopeFuture().view({H, 1, 1}) * futureDistance);  // (H, Tq, Tk)
  auto blocked = (blockPast_.view({H, 1, 1}) & (d < 0)) | (blockFuture_.view({H, 1, 1}) & (d > 0));
  bias = bias.masked_fill(blocked, -std::numeric_limits<float>::infinity());
  if (spec_.hasFirstTokenBias) {
    auto touchesFirst = (i == 0) | (j == 0);  // (Tq, Tk): replaced by the learned bias (linear_bias_spec.h)
    bias = torch::where(touchesFirst, firstTokenBias_.view({H, 1, 1}).expand_as(bias), bias);
  }
  return bias;
}

}  // namespace xtrap
