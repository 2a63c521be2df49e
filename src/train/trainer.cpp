#include "train/trainer.h"

#include <fmt/format.h>
#include <torch/torch.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <optional>
#include <stdexcept>

#include "data/block_sampler.h"
#include "data/mlm_masking.h"
#include "data/task_mix.h"
#include "data/wikitext.h"
#include "dist/dist_env.h"
#include "dist/dist_group.h"
#include "dist/gradient_sync.h"
#include "eval/encoder_score.h"
#include "eval/perplexity.h"
#include "model/flops.h"
#include "run/checkpoint.h"
#include "run/data_digest.h"
#include "run/run_lock.h"
#include "train/gradient_clip.h"
#include "train/in_place_adamw.h"
#include "train/lr_schedule.h"
#include "train/objective.h"
#include "util/atomic_file.h"
#include "util/execution_context.h"
#include "util/interrupt.h"
#include "util/out_of_memory.h"
#include "util/progress_bar.h"
#include "util/runtime.h"

namespace xtrap {
namespace fs = std::filesystem;

namespace {

// Weight decay on matrices only (nanoGPT): biases, norms, slopes and scalars are not decayed.
std::unique_ptr<InPlaceAdamW> makeOptimizer(Transformer& model, const TrainConfig& t) {
  std::vector<torch::Tensor> decay, noDecay;
  for (auto& p : model->parameters()) (p.dim() >= 2 ? decay : noDecay).push_back(p);
  auto options = torch::optim::AdamWOptions(t.lr).betas({t.beta1, t.beta2}).weight_decay(t.weightDecay);
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(decay, std::make_unique<torch::optim::AdamWOptions>(options));
  auto noDecayOptions = options;
  noDecayOptions.weight_decay(0.0);
  groups.emplace_back(noDecay, std::make_unique<torch::optim::AdamWOptions>(noDecayOptions));
  return std::make_unique<InPlaceAdamW>(groups, options);
}

void setLearningRate(torch::optim::AdamW& opt, double lr) {
  for (auto& group : opt.param_groups()) static_cast<torch::optim::AdamWOptions&>(group.options()).lr(lr);
}

torch::Tensor torchRngState() {
  auto gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  return gen.get_state();
}
void restoreTorchRng(const torch::Tensor& state) {
  auto gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  gen.set_state(state);
}

// Mean validation NLL at the training length on the first evalTokens tokens of the valid split;
// the ranks split the windows.
double validationLoss(Transformer& model, const Corpus& corpus, const TrainConfig& t, DistGroup& group) {
  DeferInterrupts defer;  // the training loop checkpoints first, then stops
  const auto& valid = corpus.valid;
  TokenSpan head = valid.subspan(0, size_t(std::min<int64_t>(t.evalTokens, valid.size())));
  WindowShard shard{group.rank(), group.world()};
  ScoreTotals totals;
  if (model->config.causal()) {
    ScoreOptions opt;
    opt.Lvalid = model->config.contextLength;
    opt.shard = shard;
    opt.eos = corpus.vocab.eos();
    totals = scoreDecoder(model, head, opt);
  } else {
    EncoderScoreOptions opt;
    opt.Lvalid = model->config.contextLength;
    opt.maskProb = t.maskProb;
    opt.shard = shard;
    opt.mlm = model->config.mlmTokens(corpus.vocab);
    totals = scoreEncoder(model, head, opt);
  }
  totals.sumOverRanks(group);
  model->train();
  return totals.meanNll();
}

// Keeps the log lines written before the checkpoint of `step` (a resumed run redoes the rest):
// the step lines up to it, but not the end-of-run validation line, which has no "loss" and is
// written after the last step's line.
void truncateLog(const fs::path& file, int64_t step) {
  if (!fs::exists(file)) return;
  std::ifstream in(file);
  std::string line, kept;
  while (std::getline(in, line)) {
    try {
      auto j = nlohmann::json::parse(line);
      int64_t s = j.value("step", int64_t(0));
      if (s < step || (s == step && j.contains("loss"))) kept += line + "\n";
    } catch (const nlohmann::json::exception&) {
      // a torn last line from a killed run
    }
  }
  writeTextAtomically(file, kept);
}

// Dropout stream of rank > 0 for one step (rank 0 uses the run's seed and checkpoints its
// generator, as a single process does). Re-seeded at every step from (seed, rank, step), so a
// rank > 0 resumed at any step draws exactly the masks of the uninterrupted run with no state in
// the checkpoint; with another world size the ranks' slices differ anyway, and so do the masks.
uint64_t rankDropoutSeed(uint64_t seed, int rank, int64_t step) {
  return stepMaskSeed(seed + static_cast<uint64_t>(rank) * 0x9E3779B97F4A7C15ULL, step);
}

// The run directory's side of training, kept by rank 0 alone (the other ranks only read the
// checkpoint): run.json, train.jsonl, checkpoint.pt with the data-order and generator states,
// and the stops that leave them consistent.
class RunRecorder {
 public:
  RunRecorder(RunInfo& run, bool root, torch::Device device) : run_(run), root_(root), device_(device) {}

  // A fresh run: makes the directory. --resume: loads the checkpoint (if any) into the model,
  // optimizer, sampler and generators and keeps the log lines written before it. Then run.json
  // says "training".
  TrainingState begin(bool resume, Transformer& model, torch::optim::Optimizer& optimizer, BlockSampler& sampler) {
    TrainingState state;
    if (root_) {
      // From here until the run ends no other process writes this directory (two trains with
      // the same --out, a --resume beside a running train, two scenario runs).
      if (!resume) makeRunDirectory(run_.dir);
      lock_.emplace(run_.dir);
      if (!resume) requireNoRunIn(run_.dir);  // again, now that no one else can start one
    }
    if (resume && root_) removeStaleTemporaries(run_.dir);
    if (resume && fs::exists(checkpointPath(run_.dir))) {
      state = loadCheckpoint(checkpointPath(run_.dir), model, &optimizer);
      sampler.restore(state.samplerState);
      if (root_ && state.torchRngState.defined()) restoreTorchRng(state.torchRngState);
      if (root_) restoreCudaGeneratorState(device_, state.cudaRngState);
      if (root_) truncateLog(logFile(), state.step);
      checkpointStep_ = state.step;
    } else if (root_) {
      if (fs::exists(logFile())) fs::remove(logFile());
    }
    if (root_) {
      log_.open(logFile(), std::ios::app);
      if (!log_) failLog();
    }
    run_.status = "training";
    run_.stepsDone = state.step;
    if (root_) writeRunInfo(run_);
    return state;
  }

  void log(const nlohmann::json& line) {
    if (!root_) return;
    log_ << line.dump() << "\n" << std::flush;
    if (!log_) failLog();
  }

  // Rank 0 writes it; every rank records the step (all decide alike whether one is due).
  void checkpoint(TrainingState& state, Transformer& model, torch::optim::Optimizer& optimizer,
                  const BlockSampler& sampler) {
    if (root_) {
      state.samplerState = sampler.state();
      state.torchRngState = torchRngState();
      state.cudaRngState = cudaGeneratorState(device_);
      saveCheckpoint(checkpointPath(run_.dir), model, &optimizer, state);
    }
    checkpointStep_ = state.step;
  }
  bool checkpointed(int64_t step) const { return checkpointStep_ == step; }

  // run.json after a step, or at the end with the final numbers.
  void record(const std::string& status, int64_t stepsDone) {
    run_.status = status;
    run_.stepsDone = stepsDone;
    if (root_) writeRunInfo(run_);
  }

  // The parameters are still finite (bad updates were skipped), but whatever produces the
  // non-finite values will not go away by itself: stop, leaving the last checkpoint as it is.
  [[noreturn]] void stopForBadSteps(const TrainingState& state) {
    record("stopped", std::max<int64_t>(checkpointStep_, 0));
    std::string kept = checkpointStep_ >= 0 ? fmt::format("last good checkpoint {} (step {})",
                                                          checkpointPath(run_.dir).string(), checkpointStep_)
                                            : std::string("no checkpoint was written");
    throw std::runtime_error(
        fmt::format("training stopped at step {}: {} steps had a non-finite loss or gradient (--max-bad-steps {}); {}",
                    state.step, state.badSteps, run_.train.maxBadSteps, kept));
  }

  // Called after the checkpoint of the current step is on disk.
  [[noreturn]] void stopForSignal(const TrainingState& state, int signal) {
    record("interrupted", state.step);
    if (!root_) throw Interrupted(signal, "");  // one line per job: rank 0's
    throw Interrupted(signal, fmt::format("interrupted by {} at step {}: checkpoint saved; continue with "
                                          "xtrap train --resume {}",
                                          signalName(signal), state.step, run_.dir.string()));
  }

 private:
  fs::path logFile() const { return run_.dir / "train.jsonl"; }
  [[noreturn]] void failLog() const {
    throw std::runtime_error("cannot write " + logFile().string() + ": " + std::strerror(errno));
  }

  RunInfo& run_;
  bool root_;
  torch::Device device_;
  int64_t checkpointStep_ = -1;  // step of the checkpoint on disk; -1 = none
  std::optional<RunLock> lock_;  // root: held until the run ends
  std::ofstream log_;
};

// One optimizer step of this rank, on the device the model was placed on: the loss of its slice
// of the global batch (the model moves the batch and computes in its precision), backward with
// the gradient all-reduce overlapping it, clipping, and the update unless the loss summed over
// ranks or the gradient is not finite.
class TrainStep {
 public:
  TrainStep(Transformer& model, const TrainConfig& t, DistGroup& group)
      : model_(model),
        t_(t),
        group_(group),
        optimizer_(makeOptimizer(model, t)),
        sync_(group, model->parameters(), model->sparseGradientParameters()) {
    optimizer_->shardOver(group);
    optimizer_->allocateState();
  }

  struct Outcome {
    double loss = 0, gradNorm = 0;
    bool bad = false;    // skipped: non-finite loss or gradient
    int stopSignal = 0;  // SIGINT/SIGTERM seen by any rank (all ranks agree)
  };

  // tasks: empty, or the global batch's task rows (objective.h), one per start.
  Outcome run(TokenSpan stream, const std::vector<int64_t>& starts, int64_t step, double lr, const MlmTokens& mlm,
              bool injectNan, const TaskRows& tasks) {
    setLearningRate(*optimizer_, lr);
    const int64_t localB = static_cast<int64_t>(starts.size()) / group_.world();
    std::vector<int64_t> mine(starts.begin() + group_.rank() * localB, starts.begin() + (group_.rank() + 1) * localB);
    TaskRows myTasks;
    if (!tasks.empty())
      myTasks.assign(tasks.begin() + group_.rank() * localB, tasks.begin() + (group_.rank() + 1) * localB);
    // No gradient is held through the forward pass: the last step's are dropped before it, not
    // zeroed after it (their memory, a vocabulary-sized embedding's included, is free for the
    // activations).
    for (auto& p : model_->parameters()) p.mutable_grad() = torch::Tensor();
    LossResult r = trainingLoss(model_, stream, mine, stepMaskSeed(t_.seed, step), t_.maskProb, mlm,
                                group_.rank() * localB, myTasks);
    if (injectNan) r.loss = r.loss * std::numeric_limits<double>::quiet_NaN();
    sync_.start();
    // The step's loss is the mean over the scored tokens of all ranks (encoders score a different
    // number of masked tokens on each): rank r's mean weighs tokens_r / tokens_all, and the
    // gradients are summed over ranks. A rank with no scored token adds nothing.
    double weight = 1.0;
    if (group_.world() > 1) {
      auto tokens = torch::tensor({double(r.tokens)}, torch::kFloat64);
      group_.allreduceSum(tokens);
      weight = double(r.tokens) / tokens.item<double>();
    }
    bool contributes = r.tokens > 0 || group_.world() == 1;
    torch::Tensor rankLoss = contributes ? r.loss * weight : torch::zeros({}, torch::kFloat64);
    if (contributes) rankLoss.backward();
    sync_.finish();
    // A parameter this step did not reach (an adaptive-softmax cluster no target fell in) gets a
    // zero gradient, as zero_grad() gave it: AdamW still decays it and moves it by its moments.
    for (auto& p : model_->parameters()) {
      if (p.requires_grad() && !p.grad().defined()) p.mutable_grad() = torch::zeros_like(p);
      if (p.grad().defined() && p.grad().is_sparse())
        p.mutable_grad() = p.grad().coalesce();  // one entry per row for the norm
    }
    Outcome out;
    // The step's loss and gradient norm in one host read: on a GPU the step's one synchronisation.
    auto loss = rankLoss.detach().to(torch::kFloat64).reshape({});
    auto norm = t_.clipNorm > 0 ? clipGradientNorm(model_->parameters(), t_.clipNorm).to(loss.device(), torch::kFloat64)
                                : torch::zeros({}, loss.options());
    const std::vector<double> read = toHostDoubles(torch::stack({loss, norm}));
    out.gradNorm = read[1];
    // Loss summed over ranks, and whether any rank got SIGINT/SIGTERM: all ranks decide alike, on
    // what was summed only. A signal that lands after the sum counts at the next step; read
    // afresh here it would stop this rank one step before the others, which would then wait in a
    // collective for it.
    int localSignal = interruptSignal();
    auto agreed = torch::tensor({read[0], double(localSignal != 0)}, torch::kFloat64);
    group_.allreduceSum(agreed);
    out.loss = agreed[0].item<double>();
    out.stopSignal = agreed[1].item<double>() > 0 ? (localSignal != 0 ? localSignal : SIGTERM) : 0;
    out.bad = !std::isfinite(out.loss) || !std::isfinite(out.gradNorm);
    if (!out.bad) {  // a bad step is skipped; the optimizer state stays clean
      optimizer_->step();
      model_->constrainParameters();
    }
    return out;
  }

  InPlaceAdamW& optimizer() { return *optimizer_; }
  const GradientSync& gradientSync() const { return sync_; }

 private:
  Transformer& model_;
  const TrainConfig& t_;
  DistGroup& group_;
  std::unique_ptr<InPlaceAdamW> optimizer_;
  GradientSync sync_;
};

// The run's settings: run.json's for --resume (on another device if asked), else the request's.
RunInfo runSettings(const TrainRequest& req) {
  RunInfo run;
  if (req.resume) {
    run = readRunInfo(req.runDir);
    if (!req.resumeDevice.empty()) run.train.device = req.resumeDevice;
  } else {
    run.dir = req.runDir;
    run.model = req.model;
    run.train = req.train;
  }
  return run;
}

// The vocabulary size and the default adaptive softmax, from the data.
void completeModelConfig(RunInfo& run, const TrainRequest& req, const Corpus& corpus) {
  int64_t vocab = corpus.vocab.size() + run.model.specialTokens();  // encoders add <mask> [and <bos>]
  if (req.resume && run.model.vocabSize != vocab)
    throw std::runtime_error(fmt::format("vocabulary mismatch: run {} has {} words, data {} gives {}", run.dir.string(),
                                         run.model.vocabSize, run.train.dataDir, vocab));
  run.model.vocabSize = vocab;
  if (req.defaultAdaptiveSoftmax && !req.resume && run.model.adaptiveSoftmaxCutoffs.empty())
    for (int64_t cutoff : {2000, 10000})
      if (cutoff < vocab) run.model.adaptiveSoftmaxCutoffs.push_back(cutoff);
  run.model.validate();
}

// The run's parameter count, for run.json.
int64_t parameterCount(Transformer& model) {
  int64_t n = 0;
  for (const auto& p : model->parameters()) n += p.numel();
  return n;
}

}  // namespace

RunInfo trainRun(TrainRequest req) {
  RunInfo run = runSettings(req);
  TrainConfig& t = run.train;
  t.validate();
  configureRuntime(t.threads);
  Corpus corpus = loadWikiText(t.dataDir);
  completeModelConfig(run, req, corpus);
  std::string digest = corpus.digest;
  std::string changed = dataChangedWarning(run.dir.string(), t.dataDir, run.dataDigest, digest);
  if (!changed.empty() && distEnvFromEnvironment().rank == 0)
    std::fprintf(stderr, "xtrap: warning: %s\n", changed.c_str());
  if (run.dataDigest.empty()) run.dataDigest = digest;  // a run from before the digest keeps its data from now on
  const DistEnv env = distEnvFromEnvironment();
  const ExecutionContext exec = makeExecutionContext(t.device, t.dtype, env.localRank);
  t.device = exec.deviceName();  // run.json records where it trained
  int64_t L = run.model.contextLength;
  int64_t B = t.sequencesPerStep(L);
  int64_t totalSteps = t.totalSteps(L);
  // Data parallel: every rank draws the same global batch of B starts from the one data-order
  // stream (so its state is the same for any world size) and takes its own B / world of them.
  DistGroup group(env, exec.device);
  const bool root = group.isRoot();
  if (B % group.world() != 0)
    throw std::invalid_argument(
        fmt::format("the batch of {} sequences does not split evenly over {} ranks", B, group.world()));
  // The cluster shares of the first 4M tokens: the whole split would page all of a large mapped
  // corpus into this process for an estimate (MFU) that a sample gives as well.
  TokenSpan sample = corpus.train.subspan(0, std::min<size_t>(corpus.train.size(), size_t(1) << 22));
  double stepFlops = trainStepFlops(run.model, B, t.maskProb, adaptiveClusterShares(run.model, sample));

  Transformer model(run.model);
  model->place(exec);  // before the optimizer and the gradient hooks see the parameters
  MlmTokens mlm = run.model.mlmTokens(corpus.vocab);
  TrainStep trainStep(model, t, group);
  BlockSampler sampler(static_cast<int64_t>(corpus.train.size()), sequenceSpan(run.model), t.batchOrder == "contiguous",
                       t.seed);
  if (root) torch::manual_seed(t.seed);
  // Retrieval prompts mixed into the batches (data/task_mix.h), natural filler from the train split.
  const TaskMix taskMix = parseTaskMix(t.taskMix);
  const Filler taskFiller = parseFiller(t.taskFiller);
  std::optional<RetrievalPromptBuilder> taskBuilder;
  if (!taskMix.empty()) taskBuilder.emplace(wordPhraseEncoder(corpus.vocab), corpus.train);
  auto taskRows = [&](int64_t step) {
    TaskRows rows;
    for (int64_t b = 0; taskBuilder && b < B; ++b)
      rows.push_back(taskSequence(taskMix, taskFiller, *taskBuilder, t.seed, step, b, sequenceSpan(run.model)));
    return rows;
  };
  RunRecorder recorder(run, root, exec.device);
  TrainingState state = recorder.begin(req.resume, model, trainStep.optimizer(), sampler);
  trainStep.optimizer().keepOwnRows();  // a checkpoint holds every rank's moments
  const std::string outOfMemoryDoing =
      fmt::format("training on {}, {} sequences of {} tokens a step,", exec.deviceName(), B, L);
  const std::string outOfMemoryRemedy =
      "lower --batch, or --batch-tokens when --batch is 0 (the step then sees fewer sequences)";
  auto checkpoint = [&] {
    trainStep.optimizer().gatherStateToRoot();
    recorder.checkpoint(state, model, trainStep.optimizer(), sampler);
    trainStep.optimizer().keepOwnRows();
  };
  model->train();
  auto start = std::chrono::steady_clock::now();
  int64_t tokensThisSession = 0;
  double lastLoss = NAN, lastVal = NAN, tokPerSec = 0;
  std::optional<ProgressBar> bar;
  if (req.progress && root) bar.emplace(fmt::format("train {}", run.dir.filename().string()), totalSteps);

  while (state.step < totalSteps) {
    if (!root) torch::manual_seed(rankDropoutSeed(t.seed, group.rank(), state.step));
    double lr = learningRate(t, state.step, totalSteps);
    auto step = withOutOfMemoryAdvice(outOfMemoryDoing, outOfMemoryRemedy, [&] {
      return trainStep.run(corpus.train, sampler.next(B), state.step, lr, mlm,
                           req.injectNanAtSteps.count(state.step + 1) > 0, taskRows(state.step));
    });
    if (step.bad) ++state.badSteps;
    ++state.step;
    state.tokensSeen += B * L;
    tokensThisSession += B * L;
    lastLoss = step.loss;
    double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    tokPerSec = double(tokensThisSession) / std::max(elapsed, 1e-9);

    bool doEval = t.evalEvery > 0 && state.step % t.evalEvery == 0 && state.step < totalSteps;
    if (doEval) lastVal = validationLoss(model, corpus, t, group);
    if (state.step % t.logEvery == 0 || doEval || state.step == totalSteps || step.bad) {
      nlohmann::json line = {{"step", state.step},
                             {"tokens", state.tokensSeen},
                             {"loss", step.loss},
                             {"lr", lr},
                             {"grad_norm", step.gradNorm},
                             {"tok_per_s", tokPerSec},
                             {"bad_steps", state.badSteps},
                             {"elapsed_s", elapsed},
                             {"flop_per_s", tokPerSec / double(B * L) * stepFlops}};
      if (doEval) line["val_loss"] = lastVal;
      recorder.log(line);
    }
    if (bar)
      bar->update(state.step, fmt::format("loss {:.3f}{} | {:.0f} tok/s {:.1f} GFLOP/s", step.loss,
                                          std::isnan(lastVal) ? "" : fmt::format(" val {:.3f}", lastVal), tokPerSec,
                                          tokPerSec / double(B * L) * stepFlops / 1e9));
    if (step.bad && t.maxBadSteps > 0 && state.badSteps >= t.maxBadSteps) recorder.stopForBadSteps(state);
    if (state.step % t.checkpointEvery == 0 && state.step < totalSteps) {
      checkpoint();
      recorder.record("training", state.step);
    }
    int stopSignal = group.world() == 1 ? interruptSignal() : step.stopSignal;  // alone: the latest word
    if (stopSignal != 0 && state.step < totalSteps) {
      if (!recorder.checkpointed(state.step)) checkpoint();
      if (bar) bar->finish("| interrupted");
      recorder.stopForSignal(state, stopSignal);
    }
  }
  lastVal = validationLoss(model, corpus, t, group);
  recorder.log({{"step", state.step}, {"tokens", state.tokensSeen}, {"val_loss", lastVal}});
  checkpoint();
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (bar)
    bar->finish(fmt::format("| val loss {:.3f} (ppl {:.1f}) | {:.0f} tok/s", lastVal, std::exp(lastVal), tokPerSec));
  run.extra = {{"final_train_loss", lastLoss},
               {"final_val_loss", lastVal},
               {"final_val_ppl", std::exp(lastVal)},
               {"tok_per_s", tokPerSec},
               {"train_seconds", seconds},
               {"bad_steps", state.badSteps},
               {"world_size", group.world()},
               // Gradient buckets, and how many of them the last step all-reduced during backward.
               {"allreduce_buckets", trainStep.gradientSync().buckets()},
               {"allreduce_buckets_overlapped", trainStep.gradientSync().bucketsOverlapped()},
               {"flop_per_s", tokPerSec / double(B * L) * stepFlops},
               // AdamW moments held by rank 0 (sharded over the ranks: about 1 / world each).
               {"optimizer_state_bytes", trainStep.optimizer().stateBytes()},
               {"parameters", parameterCount(model)}};
  recorder.record("finished", state.step);
  return run;
}

}  // namespace xtrap
