#pragma once
// Training losses. Decoder: next-token NLL over (B, L) windows cut from the train stream.
// Encoder: masked-LM NLL over the selected positions only (see data/mlm_masking.h).
#include <torch/torch.h>

#include <cstdint>
#include <vector>

#include "model/transformer.h"

namespace xtrap {

// starts: where each sequence begins in `stream`; returns the mean NLL and its token count.
struct LossResult {
  torch::Tensor loss;  // scalar, mean over scored tokens
  int64_t tokens = 0;
};
LossResult trainingLoss(Transformer& model, const std::vector<int32_t>& stream, const std::vector<int64_t>& starts,
                        uint64_t maskSeed, double maskProb);

// (B, span) int64 batch of the sequences starting at `starts` in `stream`.
torch::Tensor gatherSequences(const std::vector<int32_t>& stream, const std::vector<int64_t>& starts, int64_t span);

// Tokens of one sequence span (L + 1 for decoders: inputs and the shifted targets).
int64_t sequenceSpan(const ModelConfig& c);

}  // namespace xtrap
