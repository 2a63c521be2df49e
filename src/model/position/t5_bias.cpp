#include "model/position/t5_bias.h"

#include "model/t5_buckets.h"

namespace xtrap {

T5Bias::T5Bias(int64_t heads, int64_t numBuckets, int64_t maxDistance, bool bidirectional)
    : numBuckets_(numBuckets), maxDistance_(maxDistance), bidirectional_(bidirectional) {
  table_ = register_module("buckets", torch::nn::Embedding(numBuckets, heads));
  torch::nn::init::normal_(table_->weight, 0.0, 0.02);
}

torch::Tensor T5Bias::block(int64_t q0, int64_t q1, int64_t k0, int64_t k1) {
  // Bucket of every relative distance in the block, looked up once per distinct distance.
  int64_t dMin = k0 - (q1 - 1), dMax = (k1 - 1) - q0;
  std::vector<int64_t> bucketOf(static_cast<size_t>(dMax - dMin + 1));
  for (int64_t d = dMin; d <= dMax; ++d)
    bucketOf[d - dMin] = t5RelativeBucket(d, bidirectional_, numBuckets_, maxDistance_);
  auto longs = table_->weight.options().dtype(torch::kLong);  // on the table's device
  auto lookup = torch::tensor(bucketOf, longs);
  auto d = torch::arange(k0, k1, longs).unsqueeze(0) - torch::arange(q0, q1, longs).unsqueeze(1);  // (Tq, Tk)
  auto buckets = lookup.index({d - dMin});
  return table_(buckets).permute({2, 0, 1});  // (H, Tq, Tk)
}

}  // namespace xtrap
