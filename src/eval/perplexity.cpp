#include "eval/perplexity.h"

#include <map>
#include <optional>
#include <stdexcept>

#include "data/text_documents.h"
#include "util/execution_context.h"
#include "util/interrupt.h"

namespace xtrap {

ScoreTotals::ScoreTotals(int64_t positionBuckets, const std::vector<int64_t>& documentStarts)
    : bucketNll(static_cast<size_t>(positionBuckets), 0.0),
      bucketTokens(static_cast<size_t>(positionBuckets), 0),
      documentStarts(documentStarts),
      documentNll(documentStarts.size(), 0.0),
      documentTokens(documentStarts.size(), 0),
      bucketKl(static_cast<size_t>(positionBuckets), 0.0),
      documentKl(documentStarts.size(), 0.0),
      bucketSameTop(static_cast<size_t>(positionBuckets), 0),
      documentSameTop(documentStarts.size(), 0) {}

void ScoreTotals::add(const torch::Tensor& nllIn, const std::vector<int64_t>& positions, int64_t Lvalid,
                      const std::vector<int64_t>& streamIndex, const KlRows* klRows) {
  auto values = toHost(nllIn).to(torch::kFloat64);  // nllIn is on the model's device
  nll += values.sum().item<double>();
  tokens += values.size(0);
  if (klRows) {
    auto k = klRows->kl.contiguous();
    kl.insert(kl.end(), k.data_ptr<double>(), k.data_ptr<double>() + k.numel());
    sameTop += klRows->sameTop.sum().item<int64_t>();
    baseNll += klRows->baseNll.sum().item<double>();
    comparedNll += klRows->nll.sum().item<double>();
  }
  if (bucketNll.empty() && documentStarts.empty()) return;
  auto acc = values.accessor<double, 1>();
  auto buckets = static_cast<int64_t>(bucketNll.size());
  auto klValues = klRows ? klRows->kl : torch::zeros_like(values);
  auto same = klRows ? klRows->sameTop : torch::zeros(values.sizes(), torch::kBool);
  auto klAcc = klValues.accessor<double, 1>();
  auto sameAcc = same.accessor<bool, 1>();
  for (size_t r = 0; r < positions.size(); ++r) {
    auto row = static_cast<int64_t>(r);
    double value = acc[row];
    double rowKl = klAcc[row];
    int64_t rowSame = sameAcc[row] ? 1 : 0;
    if (buckets > 0) {
      auto b = static_cast<size_t>(positions[r] * buckets / Lvalid);
      bucketNll[b] += value;
      bucketTokens[b] += 1;
      bucketKl[b] += rowKl;
      bucketSameTop[b] += rowSame;
    }
    if (!documentStarts.empty()) {
      auto d = static_cast<size_t>(documentOf(documentStarts, streamIndex[r]));
      documentNll[d] += value;
      documentTokens[d] += 1;
      documentKl[d] += rowKl;
      documentSameTop[d] += rowSame;
    }
  }
}

void ScoreTotals::sumOverRanks(DistGroup& group) {
  if (group.world() == 1) return;
  if (compared()) throw std::logic_error("ScoreTotals: compared totals are scored by one process");
  // One float64 allreduce: [nll, tokens, bucketNll..., bucketTokens..., documentNll...,
  // documentTokens...] (counts are exact in float64).
  std::vector<double> values{nll, double(tokens)};
  values.insert(values.end(), bucketNll.begin(), bucketNll.end());
  values.insert(values.end(), bucketTokens.begin(), bucketTokens.end());
  values.insert(values.end(), documentNll.begin(), documentNll.end());
  values.insert(values.end(), documentTokens.begin(), documentTokens.end());
  auto summed = torch::tensor(values, torch::kFloat64);
  group.allreduceSum(summed);
  auto acc = summed.accessor<double, 1>();
  int64_t at = 0;
  nll = acc[at++];
  tokens = static_cast<int64_t>(acc[at++]);
  for (auto& v : bucketNll) v = acc[at++];
  for (auto& v : bucketTokens) v = static_cast<int64_t>(acc[at++]);
  for (auto& v : documentNll) v = acc[at++];
  for (auto& v : documentTokens) v = static_cast<int64_t>(acc[at++]);
}

ScoreTotals scoreDecoder(Transformer& model, TokenSpan stream, const ScoreOptions& opt,
                         const std::function<void(int64_t)>& onProgress) {
  torch::NoGradGuard noGrad;
  model->eval();
  Transformer base = opt.klBase;
  if (base) base->eval();
  if (opt.eos < 0) throw std::invalid_argument("scoreDecoder needs the <eos> id");
  WindowPlan plan{opt.protocol, opt.Lvalid, opt.stride, opt.bos, opt.documentStarts};
  auto windows = protocolWindows(plan, static_cast<int64_t>(stream.size()));
  std::vector<int32_t> prefixed;  // (N + 1) c x: window coordinates (window_protocol.h)
  prefixed.reserve(stream.size() + 1);
  prefixed.push_back(opt.eos);
  prefixed.insert(prefixed.end(), stream.begin(), stream.end());
  // Batch windows of equal length together.
  std::map<int64_t, std::vector<ProtocolWindow>> byLength;
  for (size_t k = 0; k < windows.size(); ++k)
    if (opt.shard.owns(k)) byLength[windows[k].length].push_back(windows[k]);

  ScoreTotals totals(opt.positionBuckets, opt.documentStarts);
  auto data = torch::from_blob(prefixed.data(), {static_cast<int64_t>(prefixed.size())}, torch::kInt32);
  for (const auto& [T, group] : byLength) {
    if (opt.prepareLength) opt.prepareLength(T);
    for (size_t g = 0; g < group.size(); g += static_cast<size_t>(opt.batch)) {
      throwIfInterrupted();
      size_t gEnd = std::min(group.size(), g + static_cast<size_t>(opt.batch));
      std::vector<torch::Tensor> inputs, targets, rowIndex;
      std::vector<int64_t> positions, streamIndex;  // window position and stream index of every scored row
      for (size_t w = g; w < gEnd; ++w) {
        const auto& win = group[w];
        auto input = data.narrow(0, win.start, T);
        if (win.contextFirst) {
          input = input.clone();
          input[0] = opt.eos;
        }
        inputs.push_back(input);
        targets.push_back(data.narrow(0, win.start + win.scoreFrom + 1, win.scoreTo - win.scoreFrom));
        rowIndex.push_back(torch::arange(win.scoreFrom, win.scoreTo) + int64_t(w - g) * T);
        for (int64_t p = win.scoreFrom; p < win.scoreTo; ++p) {
          positions.push_back(p);
          streamIndex.push_back(win.start + p);  // it predicts x'[start + p + 1] = x[start + p]
        }
      }
      auto x = torch::stack(inputs).to(torch::kLong);      // (B, T)
      auto target = torch::cat(targets).to(torch::kLong);  // (N)
      auto feats = model->features(x, {opt.queryBlock, nullptr});
      auto rowsAt = model->input(torch::cat(rowIndex));  // (N) built on the host, follows the features
      auto rows = feats.reshape({-1, feats.size(2)}).index_select(0, rowsAt);  // (N, C)
      auto nll = model->tokenNll(rows, target);
      std::optional<KlRows> kl;
      if (base) {
        auto baseFeats = base->features(x, {opt.queryBlock, nullptr});                                    // (B, T, C)
        auto baseRows = baseFeats.reshape({-1, baseFeats.size(2)}).index_select(0, base->input(rowsAt));  // (N, C)
        kl = compareRows(model, rows, base, baseRows, target);
      }
      totals.add(nll, positions, opt.Lvalid, streamIndex, kl ? &*kl : nullptr);
      if (onProgress) onProgress(totals.tokens);
    }
  }
  return totals;
}

}  // namespace xtrap
