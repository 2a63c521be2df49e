#include "eval/encoder_score.h"

#include <map>
#include <stdexcept>

#include "data/masked_batch.h"
#include "eval/windows.h"
#include "util/interrupt.h"

namespace xtrap {

ScoreTotals scoreEncoder(Transformer& model, const std::vector<int32_t>& stream, const EncoderScoreOptions& opt,
                         const std::function<void(int64_t)>& onProgress) {
  torch::NoGradGuard noGrad;
  model->eval();
  const ModelConfig& c = model->config;
  int64_t shift = opt.mlm.bosColumns();
  int64_t words = opt.Lvalid - shift;  // a window of Lvalid positions: [<bos>] + words
  if (words < 1) throw std::invalid_argument("--Lvalid must be >= 2 for an encoder with a <bos> token");
  int64_t stride = std::min(opt.stride > 0 ? opt.stride : opt.Lvalid, words);
  auto N = static_cast<int64_t>(stream.size());
  auto windows = encoderWindows(N, words, stride);
  std::map<int64_t, std::vector<size_t>> byLength;
  for (size_t k = 0; k < windows.size(); ++k)
    if (opt.shard.owns(k)) byLength[windows[k].length].push_back(k);

  ScoreTotals totals(opt.positionBuckets);
  for (const auto& [T, group] : byLength) {
    if (opt.prepareLength) opt.prepareLength(T);
    for (size_t g = 0; g < group.size(); g += static_cast<size_t>(opt.batch)) {
      throwIfInterrupted();
      size_t gEnd = std::min(group.size(), g + static_cast<size_t>(opt.batch));
      std::vector<int64_t> starts;
      std::vector<std::vector<int64_t>> selected;  // per window: its masked tokens scored here
      std::vector<int64_t> positions;              // window position of every scored token
      for (size_t w = g; w < gEnd; ++w) {
        int64_t s = windows[group[w]].start;
        starts.push_back(s);
        selected.emplace_back();
        // Aligned blocks of a training window's words: the masked set does not depend on Lvalid.
        for (int64_t p : alignedBlockSelection(opt.maskSeed, opt.maskProb, c.windowWords(), N, s, s + T)) {
          if (stride < words && bestEncoderWindow(windows, stride, p) != group[w]) continue;
          selected.back().push_back(p);
          positions.push_back(shift + p - s);
        }
      }
      if (positions.empty()) continue;
      MaskedBatch masked =
          corruptSelected(gatherWindows(stream, starts, T, opt.mlm.bosId), starts, selected, opt.maskSeed, opt.mlm);
      auto feats = model->features(masked.inputs, {opt.queryBlock, nullptr});  // (B, shift + T, C)
      auto rows = feats.reshape({-1, feats.size(2)}).index_select(0, masked.positions.to(feats.device()));
      totals.add(chunkedTokenNll(model, rows, masked.targets), positions, opt.Lvalid);
      if (onProgress) onProgress(totals.tokens);
    }
  }
  return totals;
}

}  // namespace xtrap
