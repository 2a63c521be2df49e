#pragma once
// How one configuration of a model changes its predictions against another (eval --kl-base): per
// scored token, KL(base || model) = sum_v p_base(v) (log p_base(v) - log p(v)) over the full
// vocabulary (an adaptive softmax's full distribution: OutputHead::logits gives its log-probs),
// whether the two distributions' most likely tokens are the same, and the base's NLL of the target;
// llama.cpp's --kl-divergence reports the same for a quantised model against its base.
// Scored a chunk of rows at a time, so at most kMaxBlockLogits logits of each model exist at once.
// N = rows scored, C = d_model, V = vocabulary.
#include <torch/torch.h>

#include <vector>

#include "model/transformer.h"

namespace xtrap {

struct KlRows {
  torch::Tensor kl;       // (N) float64, on the host
  torch::Tensor sameTop;  // (N) bool, on the host
  torch::Tensor baseNll;  // (N) float64, on the host: -log p_base(target)
  // (N) float64, on the host: -log p(target) from the same full log-softmax as baseNll, so that a
  // model against itself gives exactly the base's (the head's own NLL path differs by rounding).
  torch::Tensor nll;
};

// From log-probabilities (N, V) of the base and of the model, and the targets (N).
KlRows klFromLogProbs(const torch::Tensor& baseLogProb, const torch::Tensor& logProb, const torch::Tensor& targets);

// From each model's final features of the same rows: (N, C) each, on each model's device.
KlRows compareRows(Transformer& model, const torch::Tensor& rows, Transformer& base, const torch::Tensor& baseRows,
                   const torch::Tensor& targets);

// What a row reports of the per-token KL values: their mean, 99th and 99.9th percentiles (linear
// interpolation between the order statistics at q (n - 1), numpy's default) and maximum.
struct KlSummary {
  double mean = 0, p99 = 0, p999 = 0, max = 0;
};
KlSummary summarizeKl(std::vector<double> values);

}  // namespace xtrap
