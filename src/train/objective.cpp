#include "train/objective.h"

#include "data/masked_batch.h"

namespace xtrap {

namespace {

const RetrievalPrompt* taskAt(const TaskRows& taskRows, size_t b) {
  return b < taskRows.size() && taskRows[b] ? &*taskRows[b] : nullptr;
}

// Row b of `windows` (B, T) from column `shift` on becomes the task prompt that replaces it.
void placeTasks(torch::Tensor& windows, int64_t shift, const TaskRows& taskRows) {
  for (size_t b = 0; b < taskRows.size(); ++b)
    if (const RetrievalPrompt* task = taskAt(taskRows, b))
      windows[int64_t(b)]
          .narrow(0, shift, int64_t(task->tokens.size()))
          .copy_(torch::tensor(task->tokens, torch::kInt32).to(torch::kLong));
}

}  // namespace

MaskedBatch encoderTrainingBatch(const ModelConfig& c, TokenSpan stream, const std::vector<int64_t>& starts,
                                 uint64_t maskSeed, double maskProb, const MlmTokens& mlm, int64_t firstSequence,
                                 const TaskRows& taskRows, bool answerOnly) {
  int64_t words = sequenceSpan(c);
  auto windows = gatherWindows(stream, starts, words, mlm.bosId);  // (B, L): [<bos>] + words
  placeTasks(windows, mlm.bosColumns(), taskRows);
  std::vector<std::vector<int64_t>> selected(starts.size());  // exact count per sequence
  for (size_t b = 0; b < starts.size(); ++b) {
    const RetrievalPrompt* task = taskAt(taskRows, b);
    int64_t answerFrom = task ? task->answerBegin : words;  // a task's answer is always selected
    for (int64_t offset : exactCountSelection(sequenceMaskSeed(maskSeed, firstSequence + int64_t(b)), words, maskProb))
      if (offset < answerFrom && !(task && answerOnly)) selected[b].push_back(starts[b] + offset);
    for (int64_t offset = answerFrom; offset < words; ++offset) selected[b].push_back(starts[b] + offset);
  }
  MaskedBatch masked = corruptSelected(windows, starts, selected, maskSeed, mlm);
  for (size_t b = 0; b < starts.size(); ++b)  // answers are <mask>, as evaluation shows them
    if (const RetrievalPrompt* task = taskAt(taskRows, b))
      masked.inputs[int64_t(b)].narrow(0, mlm.bosColumns() + task->answerBegin, task->answerLength()).fill_(mlm.maskId);
  return masked;
}

BatchRows batchRows(const std::vector<int64_t>& starts, const TaskRows& tasks, int64_t first, int64_t count) {
  BatchRows rows{std::vector<int64_t>(starts.begin() + first, starts.begin() + first + count), {}};
  if (!tasks.empty()) rows.tasks.assign(tasks.begin() + first, tasks.begin() + first + count);
  return rows;
}

int64_t sequenceSpan(const ModelConfig& c) { return c.causal() ? c.contextLength + 1 : c.windowWords(); }

torch::Tensor decoderTrainingBatch(const ModelConfig& c, TokenSpan stream, const std::vector<int64_t>& starts,
                                   const TaskRows& taskRows) {
  auto seq = gatherWindows(stream, starts, sequenceSpan(c));  // (B, L + 1)
  placeTasks(seq, 0, taskRows);
  return seq;
}

LossResult decoderLoss(Transformer& model, const torch::Tensor& batch, const torch::Tensor& scoredTargets) {
  const ModelConfig& c = model->config;
  int64_t L = c.contextLength;
  auto feats = model->features(batch.narrow(1, 0, L));  // (B, L, C)
  auto targets = batch.narrow(1, 1, L).reshape({-1});
  auto nll = model->tokenNll(feats.reshape({-1, c.dModel}), targets);  // (B L)
  if (!scoredTargets.defined()) return {nll.mean(), nll.size(0)};
  auto weights = model->input(scoredTargets).reshape({-1});  // (B L)
  auto scored = static_cast<int64_t>(scoredTargets.sum().item<double>());
  return {(nll * weights).sum() / double(std::max<int64_t>(scored, 1)), scored};
}

namespace {
// (B, L) float: 1 at every target of a stream row, and at a task row's answer targets only (the
// answer's tokens [answerBegin, end) of the L + 1 are targets answerBegin - 1 onward).
torch::Tensor answerTargets(int64_t L, const TaskRows& taskRows, size_t rows) {
  auto w = torch::ones({int64_t(rows), L}, torch::kFloat32);
  for (size_t b = 0; b < rows; ++b)
    if (const RetrievalPrompt* task = taskAt(taskRows, b)) {
      w[int64_t(b)].zero_();
      w[int64_t(b)].narrow(0, task->answerBegin - 1, task->answerLength()).fill_(1.0);
    }
  return w;
}
}  // namespace

TrainingBatch trainingBatch(const ModelConfig& c, TokenSpan stream, const std::vector<int64_t>& starts,
                            uint64_t maskSeed, double maskProb, const MlmTokens& mlm, int64_t firstSequence,
                            const TaskRows& taskRows, bool answerOnly) {
  TrainingBatch batch;
  if (c.causal()) {
    batch.tokens = decoderTrainingBatch(c, stream, starts, taskRows);
    batch.scored = static_cast<int64_t>(starts.size()) * c.contextLength;
    if (answerOnly && !taskRows.empty()) {
      batch.targets = answerTargets(c.contextLength, taskRows, starts.size());
      batch.scored = static_cast<int64_t>(batch.targets.sum().item<double>());
    }
  } else {
    batch.masked =
        encoderTrainingBatch(c, stream, starts, maskSeed, maskProb, mlm, firstSequence, taskRows, answerOnly);
    batch.scored = batch.masked.targets.size(0);
  }
  return batch;
}

LossResult batchLoss(Transformer& model, const TrainingBatch& batch) {
  const ModelConfig& c = model->config;
  if (c.causal()) return decoderLoss(model, batch.tokens, batch.targets);
  const MaskedBatch& masked = batch.masked;
  auto feats = model->features(masked.inputs);                    // (B, L, C)
  auto at = model->input(masked.positions);                       // built on the host: follows the features
  auto rows = feats.reshape({-1, c.dModel}).index_select(0, at);  // only selected rows
  auto nll = model->tokenNll(rows, masked.targets);
  return {nll.mean(), nll.size(0)};
}

LossResult trainingLoss(Transformer& model, TokenSpan stream, const std::vector<int64_t>& starts, uint64_t maskSeed,
                        double maskProb, const MlmTokens& mlm, int64_t firstSequence, const TaskRows& taskRows,
                        bool answerOnly) {
  return batchLoss(model, trainingBatch(model->config, stream, starts, maskSeed, maskProb, mlm, firstSequence, taskRows,
                                        answerOnly));
}

}  // namespace xtrap
