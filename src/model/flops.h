#pragma once
// Analytic FLOP counts for model FLOPs utilisation (MFU). Only matrix products are counted
// (2 FLOPs per multiply-add); norms, softmax, GELU, dropout and the optimizer are not, as in
// Kaplan et al. / PaLM. Attention is counted as the full T x T products (PaLM's 12 * L * C * T
// per token for forward + backward), whether or not causal masking lets an implementation skip
// half of them. A training step costs 3x the forward (backward: gradients of inputs and weights).
// T = sequence length, C = d_model, F = ffn width, V = vocabulary.
#include <cstdint>
#include <vector>

#include "data/token_span.h"
#include "model/model_config.h"

namespace xtrap {

// Forward FLOPs of the transformer body (all blocks, no head) for one sequence of T tokens.
double bodyForwardFlops(const ModelConfig& c, int64_t T);

// Forward FLOPs of the output head for one scored row. With an adaptive softmax the tail
// clusters are only evaluated for rows whose target lies in them: clusterShares[i] is the
// fraction of scored rows whose target falls in tail cluster i (see adaptiveClusterShares).
double headForwardFlopsPerRow(const ModelConfig& c, const std::vector<double>& clusterShares = {});

// Fraction of `targets` in each adaptive-softmax tail cluster (empty without an adaptive softmax).
std::vector<double> adaptiveClusterShares(const ModelConfig& c, TokenSpan targets);

// Forward FLOPs of `sequences` sequences of T tokens with `scoredRows` rows through the head.
double forwardFlops(const ModelConfig& c, int64_t sequences, int64_t T, double scoredRows,
                    const std::vector<double>& clusterShares = {});

// One optimizer step on `sequences` sequences of the training length (decoder: every position
// is scored; encoder: the expected masked fraction).
double trainStepFlops(const ModelConfig& c, int64_t sequences, double maskProb,
                      const std::vector<double>& clusterShares = {});

}  // namespace xtrap
