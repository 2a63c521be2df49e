#pragma once
// A batch of encoder windows with masked-LM corruption applied (see mlm_masking.h).
#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <vector>

#include "data/mlm_masking.h"
#include "data/token_span.h"

namespace xtrap {

struct MaskedBatch {
  torch::Tensor inputs;     // (B, T) corrupted tokens
  torch::Tensor positions;  // (N) flat indices b * T + t of the selected tokens
  torch::Tensor targets;    // (N) original tokens at those positions
};

// (B, words + the frame) int64 windows: <bos> (when bosId >= 0), then stream[starts[b],
// starts[b] + words), then eosId (when >= 0).
torch::Tensor gatherWindows(TokenSpan stream, const std::vector<int64_t>& starts, int64_t words, int64_t bosId = -1,
                            int64_t eosId = -1);

// windows: from gatherWindows; starts[b]: stream position of row b's first word; selected[b]: the
// selected stream positions of row b (sorted). Corruptions come from (seed, stream position).
// Every selected position is corrupted; `scores(b, p)` says which of them row b scores (default:
// all), so an evaluation window can be as corrupted as a training window while scoring only the
// tokens it owns.
MaskedBatch corruptSelected(const torch::Tensor& windows, const std::vector<int64_t>& starts,
                            const std::vector<std::vector<int64_t>>& selected, uint64_t seed, const MlmTokens& tokens,
                            const std::function<bool(size_t, int64_t)>& scores = {});

}  // namespace xtrap
