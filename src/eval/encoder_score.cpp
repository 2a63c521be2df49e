#include "eval/encoder_score.h"

#include <map>
#include <stdexcept>

#include "util/interrupt.h"

namespace xtrap {

EncoderWindowing encoderWindowing(int64_t streamLength, const EncoderScoreOptions& opt) {
  EncoderWindowing w;
  w.words = opt.Lvalid - opt.mlm.bosColumns();  // a window of Lvalid positions: [<bos>] + words
  if (w.words < 1) throw std::invalid_argument("--Lvalid must be >= 2 for an encoder with a <bos> token");
  w.stride = std::min(opt.stride > 0 ? opt.stride : opt.Lvalid, w.words);
  w.windows = encoderWindows(streamLength, w.words, w.stride);
  return w;
}

MaskedBatch maskEncoderWindows(TokenSpan stream, const EncoderWindowing& w, const std::vector<size_t>& rows,
                               const EncoderScoreOptions& opt) {
  auto N = static_cast<int64_t>(stream.size());
  int64_t T = w.windows[rows.front()].length;
  std::vector<int64_t> starts;
  std::vector<std::vector<int64_t>> selected;  // per window: every masked token inside it
  for (size_t row : rows) {
    int64_t s = w.windows[row].start;
    starts.push_back(s);
    selected.push_back(alignedBlockSelection(opt.maskSeed, opt.maskProb, kEvalMaskBlock, N, s, s + T));
  }
  bool overlapping = w.stride < w.words;
  auto owns = [&](size_t b, int64_t p) { return !overlapping || bestEncoderWindow(w.windows, w.stride, p) == rows[b]; };
  return corruptSelected(gatherWindows(stream, starts, T, opt.mlm.bosId), starts, selected, opt.maskSeed, opt.mlm,
                         owns);
}

ScoreTotals scoreEncoder(Transformer& model, TokenSpan stream, const EncoderScoreOptions& opt,
                         const std::function<void(int64_t)>& onProgress) {
  torch::NoGradGuard noGrad;
  model->eval();
  int64_t shift = opt.mlm.bosColumns();
  EncoderWindowing w = encoderWindowing(static_cast<int64_t>(stream.size()), opt);
  std::map<int64_t, std::vector<size_t>> byLength;
  for (size_t k = 0; k < w.windows.size(); ++k)
    if (opt.shard.owns(k)) byLength[w.windows[k].length].push_back(k);

  ScoreTotals totals(opt.positionBuckets, opt.documentStarts);
  for (const auto& [T, group] : byLength) {
    // The model sees shift + T positions; dynamic interpolation and the rows' Lvalid count them
    // the same way.
    if (opt.prepareLength) opt.prepareLength(shift + T);
    for (size_t g = 0; g < group.size(); g += static_cast<size_t>(opt.batch)) {
      throwIfInterrupted();
      std::vector<size_t> rows(group.begin() + g, group.begin() + std::min(group.size(), g + size_t(opt.batch)));
      MaskedBatch masked = maskEncoderWindows(stream, w, rows, opt);
      if (masked.positions.numel() == 0) continue;
      std::vector<int64_t> positions, streamIndex;  // window position and stream index of every scored token
      auto flat = masked.positions.accessor<int64_t, 1>();
      for (int64_t i = 0; i < flat.size(0); ++i) {
        positions.push_back(flat[i] % (shift + T));
        streamIndex.push_back(w.windows[rows[size_t(flat[i] / (shift + T))]].start + positions.back() - shift);
      }
      auto feats = model->features(masked.inputs, {opt.queryBlock, nullptr});  // (B, shift + T, C)
      auto scored = feats.reshape({-1, feats.size(2)}).index_select(0, model->input(masked.positions));
      totals.add(model->tokenNll(scored, masked.targets), positions, opt.Lvalid, streamIndex);
      if (onProgress) onProgress(totals.tokens);
    }
  }
  return totals;
}

}  // namespace xtrap
