#include "scenario/cost_model.h"

#include <algorithm>
#include <thread>

namespace xtrap {

namespace {
// Effective FLOP/s per thread of LibTorch CPU kernels on small (d = 64) models, calibrated from
// the shipped scenarios on the project's shared 2-core machine (one thread per run: 3.4-5.8k
// training tokens/s). Two threads per run on an oversubscribed machine were several times slower.
constexpr double kFlopsPerThread = 8e9;

double flopsPerSecond(int64_t threads) {
  int64_t n = threads > 0 ? threads : std::max<int64_t>(1, std::thread::hardware_concurrency());
  return kFlopsPerThread * double(n);
}
}  // namespace

double forwardFlopsPerToken(const ModelConfig& m, int64_t vocab, int64_t context, double maskProb) {
  double d = double(m.dModel);
  double blocks = 2.0 * double(m.layers) * (4.0 * d * d + 2.0 * d * double(m.ffn));
  // QK^T and AV over the attended keys: half of them for causal attention.
  double keys = m.causal() ? double(context) / 2.0 : double(context);
  double attention = 2.0 * double(m.layers) * 2.0 * keys * d;
  double head;
  if (!m.adaptiveSoftmaxCutoffs.empty()) {
    // Head cluster for every token; the tails (projected to smaller widths) are a minority of tokens.
    double shortlist = double(m.adaptiveSoftmaxCutoffs.front() + int64_t(m.adaptiveSoftmaxCutoffs.size()));
    head = 2.0 * d * shortlist * 1.5;
  } else {
    head = 2.0 * d * double(vocab) * (m.causal() ? 1.0 : maskProb);
  }
  return blocks + attention + head;
}

double estimateTrainSeconds(const ModelConfig& m, int64_t vocab, int64_t tokens, double maskProb, int64_t threads) {
  return 3.0 * double(tokens) * forwardFlopsPerToken(m, vocab, m.contextLength, maskProb) / flopsPerSecond(threads);
}

double estimateEvalSeconds(const ModelConfig& m, int64_t vocab, int64_t tokens, int64_t Lvalid, int64_t stride,
                           double maskProb, int64_t threads) {
  double windows = double(tokens) / double(std::max<int64_t>(1, stride));
  double forwardTokens = windows * double(Lvalid);
  return forwardTokens * forwardFlopsPerToken(m, vocab, Lvalid, maskProb) / flopsPerSecond(threads);
}

}  // namespace xtrap
