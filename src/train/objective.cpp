#include "train/objective.h"

#include "data/masked_batch.h"

namespace xtrap {

int64_t sequenceSpan(const ModelConfig& c) { return c.causal() ? c.contextLength + 1 : c.windowWords(); }

LossResult trainingLoss(Transformer& model, TokenSpan stream, const std::vector<int64_t>& starts, uint64_t maskSeed,
                        double maskProb, const MlmTokens& mlm, int64_t firstSequence) {
  const ModelConfig& c = model->config;
  if (c.causal()) {
    auto seq = gatherWindows(stream, starts, sequenceSpan(c));  // (B, L + 1)
    int64_t L = c.contextLength;
    auto feats = model->features(seq.narrow(1, 0, L));  // (B, L, C)
    auto targets = seq.narrow(1, 1, L).reshape({-1});
    auto nll = model->tokenNll(feats.reshape({-1, c.dModel}), targets);
    return {nll.mean(), nll.size(0)};
  }
  int64_t words = sequenceSpan(c);
  auto windows = gatherWindows(stream, starts, words, mlm.bosId);  // (B, L): [<bos>] + words
  std::vector<std::vector<int64_t>> selected(starts.size());       // exact count per sequence
  for (size_t b = 0; b < starts.size(); ++b) {
    for (int64_t offset : exactCountSelection(sequenceMaskSeed(maskSeed, firstSequence + int64_t(b)), words, maskProb))
      selected[b].push_back(starts[b] + offset);
  }
  MaskedBatch masked = corruptSelected(windows, starts, selected, maskSeed, mlm);
  auto feats = model->features(masked.inputs);                    // (B, L, C)
  auto at = model->input(masked.positions);                       // built on the host: follows the features
  auto rows = feats.reshape({-1, c.dModel}).index_select(0, at);  // only selected rows
  auto nll = model->tokenNll(rows, masked.targets);
  return {nll.mean(), nll.size(0)};
}

}  // namespace xtrap
