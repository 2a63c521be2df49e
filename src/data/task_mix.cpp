#include "data/task_mix.h"

#include <fmt/format.h>

#include <random>
#include <sstream>
#include <stdexcept>

#include "util/fnv1a64.h"

namespace xtrap {

TaskMix parseTaskMix(const std::string& spec) {
  TaskMix mix;
  if (spec.empty()) return mix;
  std::stringstream items(spec);
  std::string item;
  bool seen[2] = {false, false};
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
    int t = task == RetrievalTask::Passkey ? 0 : 1;
    if (seen[t]) throw std::invalid_argument("--task-mix names " + retrievalTaskName(task) + " twice");
    seen[t] = true;
    (task == RetrievalTask::Passkey ? mix.passkey : mix.kvLines) = share;
  }
  if (mix.passkey + mix.kvLines > 1 + 1e-12)
    throw std::invalid_argument(fmt::format("--task-mix shares sum to {:g}, more than 1", mix.passkey + mix.kvLines));
  return mix;
}

std::string taskMixSpec(const TaskMix& mix) {
  std::string spec;
  if (mix.passkey > 0) spec += fmt::format("passkey:{:g}", mix.passkey);
  if (mix.kvLines > 0) spec += fmt::format("{}kv-lines:{:g}", spec.empty() ? "" : ",", mix.kvLines);
  return spec;
}

std::optional<RetrievalPrompt> taskSequence(const TaskMix& mix, Filler filler, const RetrievalPromptBuilder& builder,
                                            uint64_t seed, int64_t step, int64_t row, int64_t length) {
  if (mix.empty()) return std::nullopt;
  std::mt19937_64 rng(fnv1a64(fmt::format("task-mix|{}|{}|{}", seed, step, row)));
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  double u = unit(rng);
  std::optional<RetrievalTask> task;
  if (u < mix.passkey)
    task = RetrievalTask::Passkey;
  else if (u < mix.passkey + mix.kvLines)
    task = RetrievalTask::KvLines;
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
