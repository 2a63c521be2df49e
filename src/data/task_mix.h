#pragma once
// Teaching retrieval at the training length: `xtrap train --task-mix passkey:P,kv-lines:Q` replaces
// a share P (Q) of the training sequences by passkey (kv-lines) prompts (data/retrieval_prompt.h)
// of the sequence's own length, the answer at a uniformly random depth. Which rows are replaced,
// and by what, is a function of (seed, step, row of the global batch) alone, so a resumed run and
// any number of data-parallel ranks see the same batches, and the stream's data order is untouched
// (a replaced row's block is simply not read).
#include <cstdint>
#include <optional>
#include <string>

#include "data/retrieval_prompt.h"

namespace xtrap {

struct TaskMix {
  double passkey = 0, kvLines = 0;  // shares of the training sequences, summing to at most 1
  bool empty() const { return passkey == 0 && kvLines == 0; }
};

// "passkey:0.2,kv-lines:0.1" (either may be left out; "" = none). Throws a one-line error.
TaskMix parseTaskMix(const std::string& spec);
// The canonical spelling ("" when empty): what run.json records.
std::string taskMixSpec(const TaskMix& mix);

// The prompt that replaces row `row` of step `step`'s global batch, or none; `length` tokens.
std::optional<RetrievalPrompt> taskSequence(const TaskMix& mix, Filler filler, const RetrievalPromptBuilder& builder,
                                            uint64_t seed, int64_t step, int64_t row, int64_t length);

}  // namespace xtrap
