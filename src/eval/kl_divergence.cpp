#include "eval/kl_divergence.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "model/linear_nll.h"
#include "util/execution_context.h"

namespace xtrap {

KlRows klFromLogProbs(const torch::Tensor& baseLogProb, const torch::Tensor& logProb, const torch::Tensor& targets) {
  auto pBase = baseLogProb.to(torch::kFloat64);  // (N, V)
  auto p = logProb.to(pBase.device()).to(torch::kFloat64);
  // 0 log 0 = 0: a token the base rules out contributes nothing, whatever the model gives it.
  auto terms = torch::where(pBase.isneginf(), torch::zeros_like(pBase), pBase.exp() * (pBase - p));
  KlRows out;
  out.kl = toHost(terms.sum(1));
  out.sameTop = toHost(pBase.argmax(1) == p.argmax(1));
  auto at = targets.to(pBase.device()).to(torch::kLong).unsqueeze(1);  // (N, 1)
  out.baseNll = toHost(-pBase.gather(1, at).squeeze(1));
  out.nll = toHost(-p.gather(1, at).squeeze(1));
  return out;
}

KlRows compareRows(Transformer& model, const torch::Tensor& rows, Transformer& base, const torch::Tensor& baseRows,
                   const torch::Tensor& targets) {
  int64_t N = rows.size(0), V = model->config.vocabSize;
  int64_t chunk = std::max<int64_t>(1, kMaxBlockLogits / std::max<int64_t>(V, 1));
  std::vector<torch::Tensor> kl, sameTop, baseNll, nll;
  for (int64_t r0 = 0; r0 < N; r0 += chunk) {
    int64_t n = std::min(chunk, N - r0);
    auto logProb = torch::log_softmax(model->logits(rows.narrow(0, r0, n)).to(torch::kFloat32), -1);  // (n, V)
    auto baseLogProb = torch::log_softmax(base->logits(baseRows.narrow(0, r0, n)).to(torch::kFloat32), -1);
    KlRows part = klFromLogProbs(baseLogProb, logProb, targets.narrow(0, r0, n));
    kl.push_back(part.kl), sameTop.push_back(part.sameTop), baseNll.push_back(part.baseNll), nll.push_back(part.nll);
  }
  if (kl.empty()) {
    auto none = torch::zeros({0}, torch::kFloat64);
    return {none, torch::zeros({0}, torch::kBool), none, none};
  }
  return {torch::cat(kl), torch::cat(sameTop), torch::cat(baseNll), torch::cat(nll)};
}

KlSummary summarizeKl(std::vector<double> values) {
  KlSummary s;
  if (values.empty()) return s;
  std::sort(values.begin(), values.end());
  auto at = [&](double q) {
    double i = q * double(values.size() - 1);
    auto i0 = static_cast<size_t>(std::floor(i));
    size_t i1 = std::min(i0 + 1, values.size() - 1);
    return values[i0] + (i - double(i0)) * (values[i1] - values[i0]);
  };
  s.mean = std::accumulate(values.begin(), values.end(), 0.0) / double(values.size());
  s.p99 = at(0.99);
  s.p999 = at(0.999);
  s.max = values.back();
  return s;
}

}  // namespace xtrap
