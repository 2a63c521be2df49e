#include "model/position/t5_bias.h"

#include "model/t5_buckets.h"

namespace xtrap {

T5Bias::T5Bias(int64_t heads, int64_t numBuckets, int64_t maxDistance, bool bidirectional)
    : numBuckets_(numBuckets), maxDistance_(maxDistance), bidirectional_(bidirectional) {
  table_ = register_module("buckets", torch::nn::Embedding(numBuckets, heads));
  torch::nn::init::normal_(table_->weight, 0.0, 0.02);
}

torch::Tensor T5Bias::block(int64_t q0, int64_t q1, int64_t k0, int64_t k1) {
  auto longs = table_->weight.options().dtype(torch::kLong);  // on the table's device
  auto relative = torch::arange(k0, k1, longs).unsqueeze(0) - torch::arange(q0, q1, longs).unsqueeze(1);
  return ofRelative(relative, k0 - (q1 - 1), (k1 - 1) - q0);  // the range known without a device sync
}

torch::Tensor T5Bias::atPositions(const torch::Tensor& queryPositions, const torch::Tensor& keyPositions) {
  auto reals = table_->weight.options().dtype(torch::kFloat64);
  auto relative = keyPositions.to(reals).unsqueeze(0) - queryPositions.to(reals).unsqueeze(1);  // (Tq, Tk)
  relative = relative.trunc().to(torch::kLong);
  return ofRelative(relative, relative.min().item<int64_t>(), relative.max().item<int64_t>());
}

torch::Tensor T5Bias::ofRelative(const torch::Tensor& relative, int64_t dMin, int64_t dMax) {
  // Bucket of every relative distance, looked up once per distinct distance.
  std::vector<int64_t> bucketOf(static_cast<size_t>(dMax - dMin + 1));
  for (int64_t d = dMin; d <= dMax; ++d)
    bucketOf[d - dMin] = t5RelativeBucket(d, bidirectional_, numBuckets_, maxDistance_);
  auto lookup = torch::tensor(bucketOf, relative.options());
  auto buckets = lookup.index({relative - dMin});
  return table_(buckets).permute({2, 0, 1});  // (H, Tq, Tk)
}

}  // namespace xtrap
