#include "eval/encoder_score.h"

#include <algorithm>
#include <map>
#include <stdexcept>

#include "util/interrupt.h"

namespace xtrap {

EncoderWindowing encoderWindowing(int64_t streamLength, const EncoderScoreOptions& opt) {
  EncoderWindowing w;
  w.words = opt.Lvalid - opt.mlm.frameColumns();  // a window of Lvalid positions: [<bos>] + words [+ <eos>]
  if (w.words < 1)
    throw std::invalid_argument("--Lvalid must be >= " + std::to_string(opt.mlm.frameColumns() + 1) +
                                " for an encoder whose windows hold " + std::to_string(opt.mlm.frameColumns()) +
                                " special tokens");
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
  return corruptSelected(gatherWindows(stream, starts, T, opt.mlm.bosId, opt.mlm.eosId), starts, selected, opt.maskSeed,
                         opt.mlm, owns);
}

ScoreTotals scoreEncoder(Transformer& model, TokenSpan stream, const EncoderScoreOptions& opt,
                         const std::function<void(int64_t)>& onProgress) {
  torch::NoGradGuard noGrad;
  model->eval();
  int64_t shift = opt.mlm.bosColumns(), frame = opt.mlm.frameColumns();
  EncoderWindowing w = encoderWindowing(static_cast<int64_t>(stream.size()), opt);
  std::map<int64_t, std::vector<size_t>> byLength;
  for (size_t k = 0; k < w.windows.size(); ++k)
    if (opt.shard.owns(k)) byLength[w.windows[k].length].push_back(k);

  ScoreTotals totals(opt.positionBuckets, opt.documentStarts);
  for (const auto& [T, group] : byLength) {
    // The model sees frame + T positions; dynamic interpolation and the rows' Lvalid count them
    // the same way.
    const int64_t width = frame + T;
    if (opt.prepareLength) opt.prepareLength(width);
    for (size_t g = 0; g < group.size(); g += static_cast<size_t>(opt.batch)) {
      throwIfInterrupted();
      std::vector<size_t> rows(group.begin() + g, group.begin() + std::min(group.size(), g + size_t(opt.batch)));
      MaskedBatch masked = maskEncoderWindows(stream, w, rows, opt);
      if (masked.positions.numel() == 0) continue;
      std::vector<int64_t> positions, streamIndex;  // window position and stream index of every scored token
      auto flat = masked.positions.accessor<int64_t, 1>();
      for (int64_t i = 0; i < flat.size(0); ++i) {
        positions.push_back(flat[i] % width);
        streamIndex.push_back(w.windows[rows[size_t(flat[i] / width)]].start + positions.back() - shift);
      }
      auto feats = model->features(masked.inputs, {opt.queryBlock, nullptr});  // (B, width, C)
      auto scored = feats.reshape({-1, feats.size(2)}).index_select(0, model->input(masked.positions));
      totals.add(model->tokenNll(scored, masked.targets), positions, opt.Lvalid, streamIndex);
      if (onProgress) onProgress(totals.tokens);
    }
  }
  return totals;
}

ScoreTotals scoreEncoderPll(Transformer& model, TokenSpan stream, const EncoderScoreOptions& opt,
                            const std::function<void(int64_t)>& onProgress) {
  torch::NoGradGuard noGrad;
  model->eval();
  int64_t shift = opt.mlm.bosColumns(), frame = opt.mlm.frameColumns();
  EncoderScoreOptions nonOverlapping = opt;
  nonOverlapping.stride = 0;
  EncoderWindowing w = encoderWindowing(static_cast<int64_t>(stream.size()), nonOverlapping);
  ScoreTotals totals(opt.positionBuckets, opt.documentStarts);
  int64_t preparedWidth = -1;
  for (size_t k = 0; k < w.windows.size(); ++k) {
    if (!opt.shard.owns(k)) continue;
    const EvalWindow& window = w.windows[k];
    const int64_t T = window.length, width = frame + T;
    if (opt.prepareLength && width != preparedWidth) opt.prepareLength(width), preparedWidth = width;
    auto clean = gatherWindows(stream, {window.start}, T, opt.mlm.bosId, opt.mlm.eosId);  // (1, width)
    for (int64_t first = 0; first < T; first += opt.batch) {
      throwIfInterrupted();
      const int64_t n = std::min<int64_t>(opt.batch, T - first);
      auto inputs = clean.repeat({n, 1});  // (n, width): copy i masks word first + i
      std::vector<int64_t> rows, positions, streamIndex;
      for (int64_t i = 0; i < n; ++i) {
        const int64_t column = shift + first + i;
        inputs[i][column] = opt.mlm.maskId;
        rows.push_back(i * width + column);
        positions.push_back(column);
        streamIndex.push_back(window.start + first + i);
      }
      auto targets = clean[0].narrow(0, shift + first, n);              // (n)
      auto feats = model->features(inputs, {opt.queryBlock, nullptr});  // (n, width, C)
      auto scored = feats.reshape({-1, feats.size(2)}).index_select(0, model->input(torch::tensor(rows)));
      totals.add(model->tokenNll(scored, targets), positions, opt.Lvalid, streamIndex);
      if (onProgress) onProgress(totals.tokens);
    }
  }
  return totals;
}

}  // namespace xtrap
