#pragma once
// Training losses. Decoder: next-token NLL over (B, L) windows cut from the train stream.
// Encoder: masked-LM NLL over the selected positions only: [<bos>] + L - 1 or L words per
// window, exactly int(p*n + u) of its n words selected (see data/mlm_masking.h).
#include <torch/torch.h>

#include <cstdint>
#include <optional>
#include <vector>

#include "data/masked_batch.h"
#include "data/retrieval_prompt.h"
#include "model/transformer.h"

namespace xtrap {

// starts: where each sequence begins in `stream`; returns the mean NLL and its token count.
// firstSequence: the index of starts[0] in the step's global batch (data-parallel ranks hold
// slices of it), so each sequence's exact-count mask depends on its global index only.
struct LossResult {
  torch::Tensor loss;  // scalar, mean over scored tokens
  int64_t tokens = 0;
};
// taskRows (data/task_mix.h): where set, row b is that retrieval prompt instead of the stream's
// block at starts[b] (sequenceSpan tokens long). A decoder learns it as any text; an encoder has
// its answer tokens always selected and replaced by <mask>, as retrieval evaluation presents them,
// beside the usual selection among its other tokens. answerOnly (--task-loss answer): a task row
// scores its answer tokens only (a decoder's targets there; an encoder selects nothing else in it);
// the other rows are scored as always.
using TaskRows = std::vector<std::optional<RetrievalPrompt>>;
// Rows [first, first + count) of a step's batch (a rank's slice, a micro-batch): their starts, and
// their task rows where the step has any (else none).
struct BatchRows {
  std::vector<int64_t> starts;
  TaskRows tasks;
};
BatchRows batchRows(const std::vector<int64_t>& starts, const TaskRows& tasks, int64_t first, int64_t count);
LossResult trainingLoss(Transformer& model, TokenSpan stream, const std::vector<int64_t>& starts, uint64_t maskSeed,
                        double maskProb, const MlmTokens& mlm, int64_t firstSequence = 0, const TaskRows& taskRows = {},
                        bool answerOnly = false);

// trainingLoss in two halves: the batch, built on the host before any forward pass (so that the
// tokens its loss will score are known first: a decoder's B L, an encoder's selected count), and
// its loss.
struct TrainingBatch {
  torch::Tensor tokens;   // a decoder's: decoderTrainingBatch
  torch::Tensor targets;  // a decoder's (B, L) float 1 where a target is scored (answerOnly); undefined: every one
  MaskedBatch masked;     // an encoder's: encoderTrainingBatch
  int64_t scored = 0;     // the tokens its loss scores
};
TrainingBatch trainingBatch(const ModelConfig& c, TokenSpan stream, const std::vector<int64_t>& starts,
                            uint64_t maskSeed, double maskProb, const MlmTokens& mlm, int64_t firstSequence,
                            const TaskRows& taskRows, bool answerOnly = false);
LossResult batchLoss(Transformer& model, const TrainingBatch& batch);

// An encoder's training batch as trainingLoss builds it: the windows (with taskRows placed), every
// sequence's exact-count selection (plus a task's answer), corrupted.
MaskedBatch encoderTrainingBatch(const ModelConfig& c, TokenSpan stream, const std::vector<int64_t>& starts,
                                 uint64_t maskSeed, double maskProb, const MlmTokens& mlm, int64_t firstSequence,
                                 const TaskRows& taskRows, bool answerOnly = false);

// A decoder's training batch as trainingLoss builds it, on the host: (B, L + 1) int64 tokens, the
// windows at `starts` with taskRows placed (inputs are columns [0, L), targets [1, L + 1)). Its
// shape is the same every step, which is what lets a captured step (train/device_step.h) read it
// from one device buffer.
torch::Tensor decoderTrainingBatch(const ModelConfig& c, TokenSpan stream, const std::vector<int64_t>& starts,
                                   const TaskRows& taskRows);
// A decoder's loss on such a batch (anywhere; the model moves it): the mean NLL of every target,
// or, with `scoredTargets` (B, L) float, of those it marks 1.
LossResult decoderLoss(Transformer& model, const torch::Tensor& batch, const torch::Tensor& scoredTargets = {});

// Stream tokens of one sequence (L + 1 for decoders: inputs and the shifted targets; the words
// of a window for encoders, L - 1 with <bos>).
int64_t sequenceSpan(const ModelConfig& c);

}  // namespace xtrap
