#pragma once
// Teaching retrieval at the training length: `xtrap train --task-mix passkey:P,kv-lines:Q,...`
// replaces a share P (Q, ...) of the training sequences by prompts of that task
// (data/retrieval_prompt.h, any of its tasks) of the sequence's own length, the answer at a
// uniformly random depth. Which rows are replaced,
// and by what, is a function of (seed, step, row of the global batch) alone, so a resumed run and
// any number of data-parallel ranks see the same batches, and the stream's data order is untouched
// (a replaced row's block is simply not read).
#include <array>
#include <cstdint>
#include <optional>
#include <string>

#include "data/retrieval_prompt.h"

namespace xtrap {

struct TaskMix {
  std::array<double, kRetrievalTasks> share{};  // by RetrievalTask; shares summing to at most 1
  double operator[](RetrievalTask task) const { return share[size_t(task)]; }
  bool empty() const;
};

// "passkey:0.2,kv-lines:0.1" (any tasks, each at most once; "" = none). Throws a one-line error.
TaskMix parseTaskMix(const std::string& spec);
// The canonical spelling ("" when empty): what run.json records.
std::string taskMixSpec(const TaskMix& mix);

// Checks that every task of the mix fits sequences of `length` tokens (the training length),
// naming the first that does not and its minimum: before a run is written.
void checkTaskMixFits(const TaskMix& mix, const RetrievalPromptBuilder& builder, int64_t length);

// The prompt that replaces row `row` of step `step`'s global batch, or none; `length` tokens.
std::optional<RetrievalPrompt> taskSequence(const TaskMix& mix, Filler filler, const RetrievalPromptBuilder& builder,
                                            uint64_t seed, int64_t step, int64_t row, int64_t length);

}  // namespace xtrap
