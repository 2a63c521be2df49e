#include "eval/perplexity.h"

#include <map>
#include <stdexcept>

#include "eval/windows.h"
#include "util/execution_context.h"
#include "util/interrupt.h"

namespace xtrap {

ScoreTotals::ScoreTotals(int64_t positionBuckets)
    : bucketNll(static_cast<size_t>(positionBuckets), 0.0), bucketTokens(static_cast<size_t>(positionBuckets), 0) {}

void ScoreTotals::add(const torch::Tensor& nllIn, const std::vector<int64_t>& positions, int64_t Lvalid) {
  auto values = toHost(nllIn).to(torch::kFloat64);  // nllIn is on the model's device
  nll += values.sum().item<double>();
  tokens += values.size(0);
  if (bucketNll.empty()) return;
  auto acc = values.accessor<double, 1>();
  auto buckets = static_cast<int64_t>(bucketNll.size());
  for (size_t r = 0; r < positions.size(); ++r) {
    auto b = static_cast<size_t>(positions[r] * buckets / Lvalid);
    bucketNll[b] += acc[static_cast<int64_t>(r)];
    bucketTokens[b] += 1;
  }
}

void ScoreTotals::sumOverRanks(DistGroup& group) {
  if (group.world() == 1) return;
  // One float64 allreduce: [nll, tokens, bucketNll..., bucketTokens...] (counts are exact in float64).
  std::vector<double> values{nll, double(tokens)};
  values.insert(values.end(), bucketNll.begin(), bucketNll.end());
  values.insert(values.end(), bucketTokens.begin(), bucketTokens.end());
  auto summed = torch::tensor(values, torch::kFloat64);
  group.allreduceSum(summed);
  auto acc = summed.accessor<double, 1>();
  nll = acc[0];
  tokens = static_cast<int64_t>(acc[1]);
  for (size_t b = 0; b < bucketNll.size(); ++b) {
    bucketNll[b] = acc[int64_t(2 + b)];
    bucketTokens[b] = static_cast<int64_t>(acc[int64_t(2 + bucketNll.size() + b)]);
  }
}

ScoreTotals scoreDecoder(Transformer& model, TokenSpan stream, const ScoreOptions& opt,
                         const std::function<void(int64_t)>& onProgress) {
  torch::NoGradGuard noGrad;
  model->eval();
  if (opt.eos < 0) throw std::invalid_argument("scoreDecoder needs the <eos> id");
  int64_t stride = opt.stride > 0 ? opt.stride : opt.Lvalid;
  auto windows = decoderWindows(static_cast<int64_t>(stream.size()), opt.Lvalid, stride);
  std::vector<int32_t> prefixed;  // (N + 1) <eos> x: window coordinates (windows.h)
  prefixed.reserve(stream.size() + 1);
  prefixed.push_back(opt.eos);
  prefixed.insert(prefixed.end(), stream.begin(), stream.end());
  // Batch windows of equal length together (all but possibly the last have length Lvalid).
  std::map<int64_t, std::vector<EvalWindow>> byLength;
  for (size_t k = 0; k < windows.size(); ++k)
    if (opt.shard.owns(k)) byLength[windows[k].length].push_back(windows[k]);

  ScoreTotals totals(opt.positionBuckets);
  auto data = torch::from_blob(prefixed.data(), {static_cast<int64_t>(prefixed.size())}, torch::kInt32);
  for (const auto& [T, group] : byLength) {
    if (opt.prepareLength) opt.prepareLength(T);
    for (size_t g = 0; g < group.size(); g += static_cast<size_t>(opt.batch)) {
      throwIfInterrupted();
      size_t gEnd = std::min(group.size(), g + static_cast<size_t>(opt.batch));
      std::vector<torch::Tensor> inputs, targets, rowIndex;
      std::vector<int64_t> positions;  // window position of every scored row
      for (size_t w = g; w < gEnd; ++w) {
        const auto& win = group[w];
        inputs.push_back(data.narrow(0, win.start, T));
        targets.push_back(data.narrow(0, win.start + win.scoreFrom + 1, T - win.scoreFrom));
        rowIndex.push_back(torch::arange(win.scoreFrom, T) + int64_t(w - g) * T);
        for (int64_t p = win.scoreFrom; p < T; ++p) positions.push_back(p);
      }
      auto x = torch::stack(inputs).to(torch::kLong);  // (B, T)
      auto feats = model->features(x, {opt.queryBlock, nullptr});
      auto rowsAt = model->input(torch::cat(rowIndex));  // (N) built on the host, follows the features
      auto rows = feats.reshape({-1, feats.size(2)}).index_select(0, rowsAt);  // (N, C)
      totals.add(model->tokenNll(rows, torch::cat(targets).to(torch::kLong)), positions, opt.Lvalid);
      if (onProgress) onProgress(totals.tokens);
    }
  }
  return totals;
}

}  // namespace xtrap
