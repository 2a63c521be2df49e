#pragma once
// T5 relative bias: a learned scalar per (bucket, head), buckets from t5RelativeBucket.
#include "model/position/attention_bias.h"

namespace xtrap {

struct T5Bias : AttentionBias {
  T5Bias(int64_t heads, int64_t numBuckets, int64_t maxDistance, bool bidirectional);
  torch::Tensor block(int64_t q0, int64_t q1, int64_t k0, int64_t k1) override;
  // Real positions (context extension) take the bucket of their distance truncated toward zero:
  // T5's buckets are defined on whole token distances, and the truncation keeps a pair inside the
  // bucket of the nearest whole distance it has reached.
  torch::Tensor atPositions(const torch::Tensor& queryPositions, const torch::Tensor& keyPositions) override;
  bool trainable() const override { return true; }

 private:
  // The bias of whole relative distances j - i (Tq, Tk), long, on the table's device, all within
  // [dMin, dMax].
  torch::Tensor ofRelative(const torch::Tensor& relative, int64_t dMin, int64_t dMax);
  int64_t numBuckets_, maxDistance_;
  bool bidirectional_;
  torch::nn::Embedding table_{nullptr};  // (numBuckets, H)
};

}  // namespace xtrap
