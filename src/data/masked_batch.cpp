#include "data/masked_batch.h"

#include "data/mlm_masking.h"

namespace xtrap {

MaskedBatch applyMlmMasking(const torch::Tensor& seq, const std::vector<int64_t>& starts, uint64_t seed,
                            double maskProb, int64_t vocabSize) {
  int64_t B = seq.size(0), L = seq.size(1);
  int64_t maskId = vocabSize - 1;
  MaskedBatch m;
  m.inputs = seq.clone();
  auto in = m.inputs.accessor<int64_t, 2>();
  std::vector<int64_t> positions, targets;
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t t = 0; t < L; ++t) {
      MaskChoice c = mlmMaskChoice(seed, starts[static_cast<size_t>(b)] + t, maskProb, maskId);
      if (c.action == MaskAction::NotSelected) continue;
      positions.push_back(b * L + t);
      targets.push_back(in[b][t]);
      if (c.action == MaskAction::Mask) in[b][t] = maskId;
      if (c.action == MaskAction::Random) in[b][t] = c.randomToken;
    }
  }
  m.positions = torch::tensor(positions, torch::kLong);
  m.targets = torch::tensor(targets, torch::kLong);
  return m;
}

}  // namespace xtrap
