#pragma once
// How well a model trained with --task-mix answers each task of its mix at the training length,
// measured with every validation (train.jsonl's "tasks"): the teacher-forced retrieval of
// eval/retrieval_score.h on a fixed set of prompts, so that the answer's loss can be followed over
// training (the skill appears abruptly, and for some position methods not at all).
#include <cstdint>
#include <nlohmann/json.hpp>

#include "data/task_mix.h"
#include "dist/dist_group.h"
#include "model/transformer.h"

namespace xtrap {

constexpr int64_t kTaskProbePrompts = 32;  // per task: a Wilson interval of at most +-17 points

// For each task of the mix: {"accuracy", "answer_logprob"} over kTaskProbePrompts prompts of
// `length` tokens (prompt seed 1, depths 0, 1/31, ..., 1 of the filler), the ranks splitting them.
// Leaves the model in training mode; draws no random numbers.
nlohmann::json taskProbe(Transformer& model, const TaskMix& mix, Filler filler, const RetrievalPromptBuilder& builder,
                         int64_t length, const MlmTokens& mlm, DistGroup& group);

}  // namespace xtrap
