#include "data/masked_batch.h"

#include "data/mlm_masking.h"

namespace xtrap {

torch::Tensor gatherWindows(TokenSpan stream, const std::vector<int64_t>& starts, int64_t words, int64_t bosId,
                            int64_t eosId) {
  int64_t shift = bosId >= 0 ? 1 : 0, tail = eosId >= 0 ? 1 : 0;
  auto batch = torch::empty({static_cast<int64_t>(starts.size()), shift + words + tail}, torch::kLong);  // (B, T)
  auto acc = batch.accessor<int64_t, 2>();
  std::vector<int32_t> window(static_cast<size_t>(words));
  for (size_t b = 0; b < starts.size(); ++b) {
    if (shift) acc[int64_t(b)][0] = bosId;
    stream.copy(static_cast<size_t>(starts[b]), window.size(), window.data());
    for (int64_t t = 0; t < words; ++t) acc[int64_t(b)][shift + t] = window[static_cast<size_t>(t)];
    if (tail) acc[int64_t(b)][shift + words] = eosId;
  }
  return batch;
}

MaskedBatch corruptSelected(const torch::Tensor& windows, const std::vector<int64_t>& starts,
                            const std::vector<std::vector<int64_t>>& selected, uint64_t seed, const MlmTokens& tokens,
                            const std::function<bool(size_t, int64_t)>& scores) {
  int64_t T = windows.size(1), shift = tokens.bosColumns();
  MaskedBatch m;
  m.inputs = windows.clone();
  auto in = m.inputs.accessor<int64_t, 2>();
  std::vector<int64_t> positions, targets;
  for (size_t b = 0; b < selected.size(); ++b) {
    for (int64_t p : selected[b]) {
      int64_t t = shift + p - starts[b];
      if (!scores || scores(b, p)) {
        positions.push_back(int64_t(b) * T + t);
        targets.push_back(in[int64_t(b)][t]);
      }
      MaskChoice c = mlmCorruption(seed, p, tokens.replacementWords);
      if (c.action == MaskAction::Mask) in[int64_t(b)][t] = tokens.maskId;
      if (c.action == MaskAction::Random) in[int64_t(b)][t] = c.randomToken;
    }
  }
  m.positions = torch::tensor(positions, torch::kLong);
  m.targets = torch::tensor(targets, torch::kLong);
  return m;
}

}  // namespace xtrap
