#include "run/train_config.h"

#include <algorithm>
#include <stdexcept>

#include "data/task_mix.h"
#include "util/choices.h"
#include "util/device_names.h"

namespace xtrap {

const std::vector<std::string>& TrainConfig::scheduleNames() {
  static const std::vector<std::string> names{"cosine", "inverse-sqrt", "constant"};
  return names;
}
const std::vector<std::string>& TrainConfig::batchOrderNames() {
  static const std::vector<std::string> names{"random", "contiguous"};
  return names;
}

int64_t TrainConfig::sequencesPerStep(int64_t contextLength) const {
  return batchSequences > 0 ? batchSequences : std::max<int64_t>(1, batchTokens / contextLength);
}

int64_t TrainConfig::totalSteps(int64_t contextLength) const {
  if (tokens <= 0) return steps;
  int64_t perStep = sequencesPerStep(contextLength) * contextLength;
  return std::max<int64_t>(1, (tokens + perStep - 1) / perStep);
}

void TrainConfig::validate() const {
  auto fail = [](const std::string& why) { throw std::invalid_argument(why); };
  if (steps < 1 && tokens < 1) fail("--steps or --tokens must be positive");
  if (batchSequences < 0 || (batchSequences == 0 && batchTokens < 1)) fail("batch size must be positive");
  if (accumulate < 1) fail("--accumulate must be >= 1");
  if (!(lr > 0)) fail("--lr must be positive");
  checkName(scheduleNames(), schedule, "--schedule");
  checkName(batchOrderNames(), batchOrder, "--batch-order");
  if (warmupSteps < 0) fail("--warmup must be >= 0");
  if (threads < 0) fail("--threads must be >= 0");
  if (!(maskProb > 0 && maskProb < 1)) fail("--mask-prob must be in (0, 1)");
  if (maxBadSteps < 0) fail("--max-bad-steps must be >= 0");
  if (logEvery < 1 || checkpointEvery < 1 || evalEvery < 0 || evalTokens < 1)
    fail("--log-every, --checkpoint-every and --eval-tokens must be positive");
  checkDeviceName(device);
  checkDtypeName(dtype);
  parseTaskMix(taskMix);
  parseFiller(taskFiller);
  if (taskLoss != "all" && taskLoss != "answer") fail("--task-loss must be all or answer, not " + taskLoss);
  if (taskLoss == "answer" && taskMix.empty()) fail("--task-loss answer needs a --task-mix");
  if (!(beta1 >= 0 && beta1 < 1 && beta2 >= 0 && beta2 < 1)) fail("--adam-betas must be in [0, 1)");
}

void to_json(nlohmann::json& j, const TrainConfig& c) {
  j = nlohmann::json{{"data", c.dataDir},
                     {"steps", c.steps},
                     {"tokens", c.tokens},
                     {"batch_sequences", c.batchSequences},
                     {"batch_tokens", c.batchTokens},
                     {"accumulate", c.accumulate},
                     {"lr", c.lr},
                     {"min_lr_ratio", c.minLrRatio},
                     {"warmup_steps", c.warmupSteps},
                     {"schedule", c.schedule},
                     {"weight_decay", c.weightDecay},
                     {"beta1", c.beta1},
                     {"beta2", c.beta2},
                     {"clip_norm", c.clipNorm},
                     {"seed", c.seed},
                     {"threads", c.threads},
                     {"batch_order", c.batchOrder},
                     {"log_every", c.logEvery},
                     {"eval_every", c.evalEvery},
                     {"eval_tokens", c.evalTokens},
                     {"checkpoint_every", c.checkpointEvery},
                     {"mask_prob", c.maskProb},
                     {"max_bad_steps", c.maxBadSteps},
                     {"device", c.device},
                     {"dtype", c.dtype},
                     {"task_mix", c.taskMix},
                     {"task_filler", c.taskFiller}};
  if (c.taskLoss != "all") j["task_loss"] = c.taskLoss;  // absent: all (and the identities of earlier runs)
  if (c.adapted())
    j["init"] = {{"run", c.initRun},   {"source", c.initSource}, {"checkpoint_digest", c.initDigest},
                 {"step", c.initStep}, {"interp", c.initInterp}, {"scale", c.initScale}};
}

void from_json(const nlohmann::json& j, TrainConfig& c) {
  j.at("data").get_to(c.dataDir);
  j.at("steps").get_to(c.steps);
  j.at("tokens").get_to(c.tokens);
  j.at("batch_sequences").get_to(c.batchSequences);
  j.at("batch_tokens").get_to(c.batchTokens);
  c.accumulate = j.value("accumulate", int64_t(1));  // runs made before it took each step whole
  j.at("lr").get_to(c.lr);
  j.at("min_lr_ratio").get_to(c.minLrRatio);
  j.at("warmup_steps").get_to(c.warmupSteps);
  j.at("schedule").get_to(c.schedule);
  j.at("weight_decay").get_to(c.weightDecay);
  j.at("beta1").get_to(c.beta1);
  j.at("beta2").get_to(c.beta2);
  j.at("clip_norm").get_to(c.clipNorm);
  j.at("seed").get_to(c.seed);
  j.at("threads").get_to(c.threads);
  j.at("batch_order").get_to(c.batchOrder);
  j.at("log_every").get_to(c.logEvery);
  j.at("eval_every").get_to(c.evalEvery);
  j.at("eval_tokens").get_to(c.evalTokens);
  j.at("checkpoint_every").get_to(c.checkpointEvery);
  j.at("mask_prob").get_to(c.maskProb);
  c.maxBadSteps = j.value("max_bad_steps", TrainConfig{}.maxBadSteps);  // absent in runs made before it existed
  c.device = j.value("device", std::string("cpu"));                     // every earlier run trained on the CPU
  c.dtype = j.value("dtype", std::string("float32"));
  c.taskMix = j.value("task_mix", std::string());  // runs made before the mix trained on the stream alone
  c.taskFiller = j.value("task_filler", TrainConfig{}.taskFiller);
  c.taskLoss = j.value("task_loss", std::string("all"));
  if (j.contains("init")) {
    const auto& init = j.at("init");
    init.at("run").get_to(c.initRun);
    init.at("source").get_to(c.initSource);
    init.at("checkpoint_digest").get_to(c.initDigest);
    init.at("step").get_to(c.initStep);
    init.at("interp").get_to(c.initInterp);
    init.at("scale").get_to(c.initScale);
  }
}

}  // namespace xtrap
