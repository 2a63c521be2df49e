#include "train/trainer.h"

#include <fmt/format.h>
#include <torch/torch.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstring>
#include <fstream>
#include <limits>
#include <stdexcept>

#include "data/block_sampler.h"
#include "data/mlm_masking.h"
#include "data/wikitext.h"
#include "dist/dist_group.h"
#include "dist/gradient_sync.h"
#include "eval/encoder_score.h"
#include "eval/perplexity.h"
#include "model/flops.h"
#include "run/checkpoint.h"
#include "train/lr_schedule.h"
#include "train/objective.h"
#include "util/atomic_file.h"
#include "util/interrupt.h"
#include "util/progress_bar.h"
#include "util/runtime.h"

namespace xtrap {
namespace fs = std::filesystem;

namespace {

// Weight decay on matrices only (nanoGPT): biases, norms, slopes and scalars are not decayed.
std::unique_ptr<torch::optim::AdamW> makeOptimizer(Transformer& model, const TrainConfig& t) {
  std::vector<torch::Tensor> decay, noDecay;
  for (auto& p : model->parameters()) (p.dim() >= 2 ? decay : noDecay).push_back(p);
  auto options = torch::optim::AdamWOptions(t.lr).betas({t.beta1, t.beta2}).weight_decay(t.weightDecay);
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(decay, std::make_unique<torch::optim::AdamWOptions>(options));
  auto noDecayOptions = options;
  noDecayOptions.weight_decay(0.0);
  groups.emplace_back(noDecay, std::make_unique<torch::optim::AdamWOptions>(noDecayOptions));
  return std::make_unique<torch::optim::AdamW>(groups, options);
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
  std::vector<int32_t> head(valid.begin(), valid.begin() + std::min<int64_t>(t.evalTokens, valid.size()));
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
    opt.maskSeed = t.seed;
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

// The parameters are still finite (bad updates were skipped), but whatever produces the
// non-finite values will not go away by itself: stop, leaving the last checkpoint as it is.
[[noreturn]] void stopForBadSteps(RunInfo& run, const TrainingState& state, int64_t checkpointStep, bool root) {
  run.status = "stopped";
  run.stepsDone = std::max<int64_t>(checkpointStep, 0);
  if (root) writeRunInfo(run);
  std::string kept = checkpointStep >= 0 ? fmt::format("last good checkpoint {} (step {})",
                                                       checkpointPath(run.dir).string(), checkpointStep)
                                         : std::string("no checkpoint was written");
  throw std::runtime_error(
      fmt::format("training stopped at step {}: {} steps had a non-finite loss or gradient (--max-bad-steps {}); {}",
                  state.step, state.badSteps, run.train.maxBadSteps, kept));
}

// Called after the checkpoint of the current step is on disk.
[[noreturn]] void stopForSignal(RunInfo& run, const TrainingState& state, int signal, bool root) {
  run.status = "interrupted";
  run.stepsDone = state.step;
  if (root) writeRunInfo(run);
  throw Interrupted(signal, fmt::format("interrupted by {} at step {}: checkpoint saved; continue with "
                                        "xtrap train --resume {}",
                                        signalName(signal), state.step, run.dir.string()));
}

}  // namespace

RunInfo trainRun(TrainRequest req) {
  RunInfo run;
  if (req.resume) {
    run = readRunInfo(req.runDir);
  } else {
    run.dir = req.runDir;
    run.model = req.model;
    run.train = req.train;
  }
  TrainConfig& t = run.train;
  t.validate();
  configureRuntime(t.threads);
  Corpus corpus = loadWikiText(t.dataDir);
  int64_t vocab = corpus.vocab.size() + run.model.specialTokens();  // encoders add <mask> [and <bos>]
  if (req.resume && run.model.vocabSize != vocab)
    throw std::runtime_error(fmt::format("vocabulary mismatch: run {} has {} words, data {} gives {}", run.dir.string(),
                                         run.model.vocabSize, t.dataDir, vocab));
  run.model.vocabSize = vocab;
  if (req.defaultAdaptiveSoftmax && !req.resume && run.model.adaptiveSoftmaxCutoffs.empty())
    for (int64_t cutoff : {2000, 10000})
      if (cutoff < vocab) run.model.adaptiveSoftmaxCutoffs.push_back(cutoff);
  run.model.validate();
  int64_t L = run.model.contextLength;
  int64_t B = t.sequencesPerStep(L);
  int64_t totalSteps = t.totalSteps(L);
  // Data parallel: every rank draws the same global batch of B starts from the one data-order
  // stream (so its state is the same for any world size) and takes its own B / world of them.
  DistGroup group;
  const bool root = group.isRoot();
  if (B % group.world() != 0)
    throw std::invalid_argument(
        fmt::format("the batch of {} sequences does not split evenly over {} ranks", B, group.world()));
  const int64_t localB = B / group.world();
  double stepFlops = trainStepFlops(run.model, B, t.maskProb, adaptiveClusterShares(run.model, corpus.train));

  Transformer model(run.model);
  MlmTokens mlm = run.model.mlmTokens(corpus.vocab);
  auto optimizer = makeOptimizer(model, t);
  GradientSync gradientSync(group, model->parameters());
  BlockSampler sampler(static_cast<int64_t>(corpus.train.size()), sequenceSpan(run.model), t.batchOrder == "contiguous",
                       t.seed);
  if (root) torch::manual_seed(t.seed);
  TrainingState state;
  auto logFile = run.dir / "train.jsonl";
  // Rank 0 alone writes the run directory; the others only read the checkpoint.
  if (req.resume && root) removeStaleTemporaries(run.dir);
  if (req.resume && fs::exists(checkpointPath(run.dir))) {
    state = loadCheckpoint(checkpointPath(run.dir), model, optimizer.get());
    sampler.restore(state.samplerState);
    if (root && state.torchRngState.defined()) restoreTorchRng(state.torchRngState);
    if (root) truncateLog(logFile, state.step);
  } else if (root) {
    fs::create_directories(run.dir);
    if (fs::exists(logFile)) fs::remove(logFile);
  }
  run.status = "training";
  run.stepsDone = state.step;
  if (root) writeRunInfo(run);

  int64_t checkpointStep = fs::exists(checkpointPath(run.dir)) ? state.step : -1;
  auto checkpoint = [&] {
    if (!root) return;
    state.samplerState = sampler.state();
    state.torchRngState = torchRngState();
    saveCheckpoint(checkpointPath(run.dir), model, optimizer.get(), state);
    checkpointStep = state.step;
  };

  std::ofstream log;
  if (root) log.open(logFile, std::ios::app);
  auto writeLog = [&](const nlohmann::json& line) {
    if (!root) return;
    log << line.dump() << "\n" << std::flush;
    if (!log) throw std::runtime_error("cannot write " + logFile.string() + ": " + std::strerror(errno));
  };
  if (root && !log) throw std::runtime_error("cannot write " + logFile.string() + ": " + std::strerror(errno));
  model->train();
  auto start = std::chrono::steady_clock::now();
  int64_t tokensThisSession = 0;
  double lastLoss = NAN, lastVal = NAN, tokPerSec = 0;
  std::optional<ProgressBar> bar;
  if (req.progress && root) bar.emplace(fmt::format("train {}", run.dir.filename().string()), totalSteps);

  for (; state.step < totalSteps;) {
    if (!root) torch::manual_seed(rankDropoutSeed(t.seed, group.rank(), state.step));
    double lr = learningRate(t, state.step, totalSteps);
    setLearningRate(*optimizer, lr);
    auto starts = sampler.next(B);
    std::vector<int64_t> mine(starts.begin() + group.rank() * localB, starts.begin() + (group.rank() + 1) * localB);
    LossResult r = trainingLoss(model, corpus.train, mine, stepMaskSeed(t.seed, state.step), t.maskProb, mlm,
                                group.rank() * localB);
    if (req.injectNanAtSteps.count(state.step + 1)) r.loss = r.loss * std::numeric_limits<double>::quiet_NaN();
    optimizer->zero_grad();
    gradientSync.start();
    // The step's loss is the mean over the scored tokens of all ranks (encoders score a different
    // number of masked tokens on each): rank r's mean weighs tokens_r / tokens_all, and the
    // gradients are summed over ranks. A rank with no scored token adds nothing.
    double weight = 1.0;
    if (group.world() > 1) {
      auto tokens = torch::tensor({double(r.tokens)}, torch::kFloat64);
      group.allreduceSum(tokens);
      weight = double(r.tokens) / tokens.item<double>();
    }
    bool contributes = r.tokens > 0 || group.world() == 1;
    torch::Tensor rankLoss = contributes ? r.loss * weight : torch::zeros({});
    if (contributes) rankLoss.backward();
    gradientSync.finish();
    double gradNorm = t.clipNorm > 0 ? torch::nn::utils::clip_grad_norm_(model->parameters(), t.clipNorm) : 0.0;
    // Loss summed over ranks, and whether any rank got SIGINT/SIGTERM: all ranks decide alike.
    auto agreed = torch::tensor({rankLoss.item<double>(), double(interruptSignal() != 0)}, torch::kFloat64);
    group.allreduceSum(agreed);
    double loss = agreed[0].item<double>();
    int stopSignal = interruptSignal() != 0 ? interruptSignal() : agreed[1].item<double>() > 0 ? SIGTERM : 0;
    bool bad = !std::isfinite(loss) || !std::isfinite(gradNorm);
    if (bad) {
      ++state.badSteps;  // skip the update; the optimizer state stays clean
    } else {
      optimizer->step();
    }
    ++state.step;
    state.tokensSeen += B * L;
    tokensThisSession += B * L;
    lastLoss = loss;
    double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    tokPerSec = double(tokensThisSession) / std::max(elapsed, 1e-9);

    bool doEval = t.evalEvery > 0 && state.step % t.evalEvery == 0 && state.step < totalSteps;
    if (doEval) lastVal = validationLoss(model, corpus, t, group);
    if (state.step % t.logEvery == 0 || doEval || state.step == totalSteps || bad) {
      nlohmann::json line = {{"step", state.step},
                             {"tokens", state.tokensSeen},
                             {"loss", loss},
                             {"lr", lr},
                             {"grad_norm", gradNorm},
                             {"tok_per_s", tokPerSec},
                             {"bad_steps", state.badSteps},
                             {"elapsed_s", elapsed},
                             {"flop_per_s", tokPerSec / double(B * L) * stepFlops}};
      if (doEval) line["val_loss"] = lastVal;
      writeLog(line);
    }
    if (bar)
      bar->update(state.step, fmt::format("loss {:.3f}{} | {:.0f} tok/s {:.1f} GFLOP/s", loss,
                                          std::isnan(lastVal) ? "" : fmt::format(" val {:.3f}", lastVal), tokPerSec,
                                          tokPerSec / double(B * L) * stepFlops / 1e9));
    if (bad && t.maxBadSteps > 0 && state.badSteps >= t.maxBadSteps) stopForBadSteps(run, state, checkpointStep, root);
    if (state.step % t.checkpointEvery == 0 && state.step < totalSteps) {
      checkpoint();
      run.stepsDone = state.step;
      if (root) writeRunInfo(run);
    }
    if (group.world() == 1) stopSignal = interruptSignal();  // the latest word, as before
    if (stopSignal != 0 && state.step < totalSteps) {
      if (checkpointStep != state.step) checkpoint();
      if (bar) bar->finish("| interrupted");
      stopForSignal(run, state, stopSignal, root);
    }
  }
  lastVal = validationLoss(model, corpus, t, group);
  nlohmann::json finalLine = {{"step", state.step}, {"tokens", state.tokensSeen}, {"val_loss", lastVal}};
  writeLog(finalLine);
  checkpoint();
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (bar)
    bar->finish(fmt::format("| val loss {:.3f} (ppl {:.1f}) | {:.0f} tok/s", lastVal, std::exp(lastVal), tokPerSec));
  run.status = "finished";
  run.stepsDone = state.step;
  run.extra = {{"final_train_loss", lastLoss},
               {"final_val_loss", lastVal},
               {"final_val_ppl", std::exp(lastVal)},
               {"tok_per_s", tokPerSec},
               {"train_seconds", seconds},
               {"bad_steps", state.badSteps},
               {"world_size", group.world()},
               // Gradient buckets, and how many of them the last step all-reduced during backward.
               {"allreduce_buckets", gradientSync.buckets()},
               {"allreduce_buckets_overlapped", gradientSync.bucketsOverlapped()},
               {"flop_per_s", tokPerSec / double(B * L) * stepFlops},
               {"parameters", [&] {
                  int64_t n = 0;
                  for (const auto& p : model->parameters()) n += p.numel();
                  return n;
                }()}};
  if (root) writeRunInfo(run);
  return run;
}

}  // namespace xtrap
