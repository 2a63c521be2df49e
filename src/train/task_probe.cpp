#include "train/task_probe.h"

#include "eval/retrieval_score.h"
#include "util/interrupt.h"

namespace xtrap {

nlohmann::json taskProbe(Transformer& model, const TaskMix& mix, Filler filler, const RetrievalPromptBuilder& builder,
                         int64_t length, const MlmTokens& mlm, DistGroup& group) {
  DeferInterrupts defer;  // the training loop checkpoints first, then stops
  nlohmann::json out = nlohmann::json::object();
  for (int t = 0; t < kRetrievalTasks; ++t) {
    auto task = RetrievalTask(t);
    if (mix[task] == 0) continue;
    std::vector<RetrievalPrompt> prompts;
    for (int64_t k = 0; k < kTaskProbePrompts; ++k)
      prompts.push_back(builder.build({task, filler, 1, length, double(k) / double(kTaskProbePrompts - 1), k}));
    RetrievalScoreOptions opt;
    opt.batch = 8;
    opt.queryBlock = 0;
    opt.shard = {group.rank(), group.world()};
    opt.mlm = mlm;
    RetrievalTotals totals = scoreRetrieval(model, prompts, opt);
    totals.sumOverRanks(group);
    out[retrievalTaskName(task)] = {
        {"accuracy", double(totals.correct) / double(totals.trials)},
        {"answer_logprob", totals.answerLogProb / double(std::max<int64_t>(totals.answerTokens, 1))}};
  }
  model->train();
  return out;
}

}  // namespace xtrap
