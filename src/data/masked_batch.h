#pragma once
// A batch of sequences with masked-LM corruption applied (see mlm_masking.h).
#include <torch/torch.h>

#include <cstdint>
#include <vector>

namespace xtrap {

struct MaskedBatch {
  torch::Tensor inputs;     // (B, L) corrupted tokens
  torch::Tensor positions;  // (N) flat indices b * L + t of the selected tokens
  torch::Tensor targets;    // (N) original tokens at those positions
};

// seq: (B, L) original tokens, starts[b]: absolute stream position of seq[b][0];
// vocabSize includes <mask> as its last id.
MaskedBatch applyMlmMasking(const torch::Tensor& seq, const std::vector<int64_t>& starts, uint64_t seed,
                            double maskProb, int64_t vocabSize);

}  // namespace xtrap
