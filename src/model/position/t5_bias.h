#pragma once
// T5 relative bias: a learned scalar per (bucket, head), buckets from t5RelativeBucket.
#include "model/position/attention_bias.h"

namespace xtrap {

struct T5Bias : AttentionBias {
  T5Bias(int64_t heads, int64_t numBuckets, int64_t maxDistance, bool bidirectional);
  torch::Tensor block(int64_t q0, int64_t q1, int64_t k0, int64_t k1) override;
  bool trainable() const override { return true; }

 private:
  int64_t numBuckets_, maxDistance_;
  bool bidirectional_;
  torch::nn::Embedding table_{nullptr};  // (numBuckets, H)
};

}  // namespace xtrap
