#include "model/flops.h"

namespace xtrap {

double bodyForwardFlops(const ModelConfig& c, int64_t T) {
  double C = double(c.dModel), F = double(c.ffn), t = double(T);
  double projections = 2.0 * t * (3.0 * C * C + C * C + 2.0 * C * F);  // qkv, out, fc1, fc2
  double attention = 2.0 * 2.0 * t * t * C;                            // Q K^T and P V over all heads
  return double(c.layers) * (projections + attention);
}

double headForwardFlopsPerRow(const ModelConfig& c, const std::vector<double>& clusterShares) {
  double C = double(c.dModel), V = double(c.vocabSize);
  const auto& cutoffs = c.adaptiveSoftmaxCutoffs;
  if (c.head == "lm" && !cutoffs.empty()) {
    // LibTorch's AdaptiveLogSoftmaxWithLoss (div_value 4): the head scores the shortlist plus one
    // logit per tail cluster; tail i projects C -> C / 4^(i+1) -> its cluster's words.
    double flops = 2.0 * C * double(cutoffs[0] + int64_t(cutoffs.size()));
    for (size_t i = 0; i < cutoffs.size(); ++i) {
      double hidden = double(c.dModel / (int64_t(1) << (2 * (i + 1))));
      double words = (i + 1 < cutoffs.size() ? double(cutoffs[i + 1]) : V) - double(cutoffs[i]);
      double share = i < clusterShares.size() ? clusterShares[i] : 0.0;
      flops += share * 2.0 * (C * hidden + hidden * words);
    }
    return flops;
  }
  double flops = 2.0 * C * V;                     // tied projection onto the embedding
  if (c.head == "roberta") flops += 2.0 * C * C;  // dense transform before it
  return flops;
}

std::vector<double> adaptiveClusterShares(const ModelConfig& c, TokenSpan targets) {
  const auto& cutoffs = c.adaptiveSoftmaxCutoffs;
  if (c.head != "lm" || cutoffs.empty() || targets.empty()) return {};
  std::vector<double> shares(cutoffs.size(), 0.0);
  for (int32_t t : targets) {
    for (size_t i = cutoffs.size(); i-- > 0;) {
      if (t >= cutoffs[i]) {
        shares[i] += 1.0;
        break;
      }
    }
  }
  for (double& s : shares) s /= double(targets.size());
  return shares;
}

double forwardFlops(const ModelConfig& c, int64_t sequences, int64_t T, double scoredRows,
                    const std::vector<double>& clusterShares) {
  return double(sequences) * bodyForwardFlops(c, T) + scoredRows * headForwardFlopsPerRow(c, clusterShares);
}

double trainStepFlops(const ModelConfig& c, int64_t sequences, double maskProb,
                      const std::vector<double>& clusterShares) {
  double rows = double(sequences * c.contextLength) * (c.causal() ? 1.0 : maskProb);
  return 3.0 * forwardFlops(c, sequences, c.contextLength, rows, clusterShares);
}

}  // namespace xtrap
