#include "data/task_mix.h"

#include <fmt/format.h>

#include <algorithm>
#include <random>
#include <sstream>
#include <stdexcept>

#include "util/fnv1a64.h"

namespace xtrap {

bool TaskMix::empty() const {
  return std::all_of(share.begin(), share.end(), [](double s) { return s == 0; });
}

TaskMix parseTaskMix(const std::string& spec) {
  TaskMix mix;
  if (spec.empty()) return mix;
  std::stringstream items(spec);
  std::string item;
  double total = 0;
  while (std::getline(items, item, ',')) {
    size_t colon = item.find(':');
    if (colon == std::string::npos)
      throw std::invalid_argument("bad --task-mix item '" + item + "': expected TASK:SHARE (e.g. passkey:0.2)");
    RetrievalTask task = parseRetrievalTask(item.substr(0, colon));
    std::string number = item.substr(colon + 1);
    double share = -1;
    size_t used = 0;
    try {
      share = std::stod(number, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != number.size() || !(share > 0 && share <= 1))
      throw std::invalid_argument("bad --task-mix share '" + number + "': expected a number in (0, 1]");
    if (mix[task] > 0) throw std::invalid_argument("--task-mix names " + retrievalTaskName(task) + " twice");
    mix.share[size_t(task)] = share;
    total += share;
  }
  if (total > 1 + 1e-12) throw std::invalid_argument(fmt::format("--task-mix shares sum to {:g}, more than 1", total));
  return mix;
}

std::string taskMixSpec(const TaskMix& mix) {
  std::string spec;
  for (int t = 0; t < kRetrievalTasks; ++t)
    if (mix.share[size_t(t)] > 0)
      spec +=
          fmt::format("{}{}:{:g}", spec.empty() ? "" : ",", retrievalTaskName(RetrievalTask(t)), mix.share[size_t(t)]);
  return spec;
}

void checkTaskMixFits(const TaskMix& mix, const RetrievalPromptBuilder& builder, int64_t length) {
  for (int t = 0; t < kRetrievalTasks; ++t) {
    if (mix.share[size_t(t)] == 0) continue;
    int64_t minimum = builder.minimumLength(RetrievalTask(t));
    if (length < minimum)
      throw std::invalid_argument(fmt::format(
          "--task-mix {}: its prompts need at least {} tokens; the training sequences have {} (a longer --L fits it)",
          retrievalTaskName(RetrievalTask(t)), minimum, length));
  }
}

std::optional<RetrievalPrompt> taskSequence(const TaskMix& mix, Filler filler, const RetrievalPromptBuilder& builder,
                                            uint64_t seed, int64_t step, int64_t row, int64_t length) {
  if (mix.empty()) return std::nullopt;
  std::mt19937_64 rng(fnv1a64(fmt::format("task-mix|{}|{}|{}", seed, step, row)));
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  double u = unit(rng);
  // Tasks in enum order over [0, 1): a mix of passkey and kv-lines draws as it always has.
  std::optional<RetrievalTask> task;
  double upTo = 0;
  for (int t = 0; t < kRetrievalTasks && !task; ++t) {
    upTo += mix.share[size_t(t)];
    if (mix.share[size_t(t)] > 0 && u < upTo) task = RetrievalTask(t);
  }
  if (!task) return std::nullopt;
  PromptRequest r;
  r.task = *task;
  r.filler = filler;
  r.length = length;
  r.depth = unit(rng);
  r.seed = rng();  // the prompt's own stream: keys, values and natural-filler offset
  r.trial = row;
  return builder.build(r);
}

}  // namespace xtrap
