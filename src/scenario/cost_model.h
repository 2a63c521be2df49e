#pragma once
// Rough CPU time estimates for `xtrap run --dry-run`: multiply-adds per token from the model's
// shape, divided by a throughput measured on this project's 2-core CPU machine. Good to a factor
// of about two; meant to tell a 5-minute scenario from a 5-hour one before starting it.
#include <cstdint>

#include "model/model_config.h"

namespace xtrap {

// Forward FLOPs for one token attending to `context` positions (the output head included for
// every token of a decoder and for the masked share of an encoder's tokens).
double forwardFlopsPerToken(const ModelConfig& m, int64_t vocab, int64_t context, double maskProb);

// Seconds to train `tokens` tokens (forward + backward ~ 3 forwards).
double estimateTrainSeconds(const ModelConfig& m, int64_t vocab, int64_t tokens, double maskProb, int64_t threads);

// Seconds to score `tokens` tokens at Lvalid with the given stride (stride = Lvalid for
// non-overlapping windows): every window of Lvalid tokens is a full forward pass.
double estimateEvalSeconds(const ModelConfig& m, int64_t vocab, int64_t tokens, int64_t Lvalid, int64_t stride,
                           double maskProb, int64_t threads);

}  // namespace xtrap
