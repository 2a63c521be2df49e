#include "eval/encoder_score.h"

#include <map>

#include "data/masked_batch.h"
#include "eval/windows.h"
#include "util/interrupt.h"

namespace xtrap {

ScoreTotals scoreEncoder(Transformer& model, const std::vector<int32_t>& stream, const EncoderScoreOptions& opt,
                         const std::function<void(int64_t)>& onProgress) {
  torch::NoGradGuard noGrad;
  model->eval();
  int64_t stride = opt.stride > 0 ? opt.stride : opt.Lvalid;
  auto windows = encoderWindows(static_cast<int64_t>(stream.size()), opt.Lvalid, stride);
  std::map<int64_t, std::vector<size_t>> byLength;
  for (size_t k = 0; k < windows.size(); ++k)
    if (opt.shard.owns(k)) byLength[windows[k].length].push_back(k);

  ScoreTotals totals(opt.positionBuckets);
  for (const auto& [T, group] : byLength) {
    for (size_t g = 0; g < group.size(); g += static_cast<size_t>(opt.batch)) {
      throwIfInterrupted();
      size_t gEnd = std::min(group.size(), g + static_cast<size_t>(opt.batch));
      auto seq = torch::empty({int64_t(gEnd - g), T}, torch::kLong);  // (B, T)
      auto acc = seq.accessor<int64_t, 2>();
      std::vector<int64_t> starts;
      for (size_t w = g; w < gEnd; ++w) {
        starts.push_back(windows[group[w]].start);
        for (int64_t t = 0; t < T; ++t) acc[int64_t(w - g)][t] = stream[static_cast<size_t>(starts.back() + t)];
      }
      MaskedBatch masked = applyMlmMasking(seq, starts, opt.maskSeed, opt.maskProb, model->config.vocabSize);
      // Keep the masked tokens whose most central window is this one.
      std::vector<int64_t> keep, positions;
      auto pos = masked.positions.accessor<int64_t, 1>();
      for (int64_t r = 0; r < pos.size(0); ++r) {
        int64_t b = pos[r] / T, t = pos[r] % T;
        size_t window = group[g + static_cast<size_t>(b)];
        if (stride == opt.Lvalid || bestEncoderWindow(windows, stride, windows[window].start + t) == window) {
          keep.push_back(r);
          positions.push_back(t);
        }
      }
      if (keep.empty()) continue;
      auto keepIdx = torch::tensor(keep, torch::kLong);
      auto feats = model->features(masked.inputs, {opt.queryBlock, nullptr});
      auto rows = feats.reshape({-1, feats.size(2)}).index_select(0, masked.positions.index_select(0, keepIdx));
      totals.add(chunkedTokenNll(model, rows, masked.targets.index_select(0, keepIdx)), positions, opt.Lvalid);
      if (onProgress) onProgress(totals.tokens);
    }
  }
  return totals;
}

}  // namespace xtrap
