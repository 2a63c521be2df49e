#include "train/objective.h"

#include "data/masked_batch.h"

namespace xtrap {

int64_t sequenceSpan(const ModelConfig& c) { return c.causal() ? c.contextLength + 1 : c.contextLength; }

torch::Tensor gatherSequences(const std::vector<int32_t>& stream, const std::vector<int64_t>& starts, int64_t span) {
  auto batch = torch::empty({static_cast<int64_t>(starts.size()), span}, torch::kLong);  // (B, span)
  auto acc = batch.accessor<int64_t, 2>();
  for (size_t b = 0; b < starts.size(); ++b)
    for (int64_t t = 0; t < span; ++t) acc[int64_t(b)][t] = stream[static_cast<size_t>(starts[b] + t)];
  return batch;
}

LossResult trainingLoss(Transformer& model, const std::vector<int32_t>& stream, const std::vector<int64_t>& starts,
                        uint64_t maskSeed, double maskProb) {
  const ModelConfig& c = model->config;
  auto seq = gatherSequences(stream, starts, sequenceSpan(c));
  if (c.causal()) {
    int64_t L = c.contextLength;
    auto feats = model->features(seq.narrow(1, 0, L));  // (B, L, C)
    auto targets = seq.narrow(1, 1, L).reshape({-1});
    auto nll = model->tokenNll(feats.reshape({-1, c.dModel}), targets);
    return {nll.mean(), nll.size(0)};
  }
  MaskedBatch masked = applyMlmMasking(seq, starts, maskSeed, maskProb, c.vocabSize);
  auto feats = model->features(masked.inputs);                                  // (B, L, C)
  auto rows = feats.reshape({-1, c.dModel}).index_select(0, masked.positions);  // only selected rows
  auto nll = model->tokenNll(rows, masked.targets);
  return {nll.mean(), nll.size(0)};
}

}  // namespace xtrap
