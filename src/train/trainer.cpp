#include "train/trainer.h"

#include <fmt/format.h>
#include <torch/torch.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <optional>
#include <stdexcept>

#include "data/block_sampler.h"
#include "data/mlm_masking.h"
#include "data/task_mix.h"
#include "data/tokenized_corpus.h"
#include "data/tokenizer.h"
#include "data/wikitext.h"
#include "dist/dist_env.h"
#include "dist/dist_group.h"
#include "model/flops.h"
#include "run/checkpoint.h"
#include "run/data_digest.h"
#include "train/device_step.h"
#include "train/init_from_run.h"
#include "train/lr_schedule.h"
#include "train/objective.h"
#include "train/run_recorder.h"
#include "train/task_probe.h"
#include "train/train_step.h"
#include "train/validation_loss.h"
#include "util/execution_context.h"
#include "util/interrupt.h"
#include "util/out_of_memory.h"
#include "util/progress_bar.h"
#include "util/runtime.h"

namespace xtrap {

namespace {

// Dropout stream of rank > 0 for one step (rank 0 uses the run's seed and checkpoints its
// generator, as a single process does). Re-seeded at every step from (seed, rank, step), so a
// rank > 0 resumed at any step draws exactly the masks of the uninterrupted run with no state in
// the checkpoint; with another world size the ranks' slices differ anyway, and so do the masks.
uint64_t rankDropoutSeed(uint64_t seed, int rank, int64_t step) {
  return stepMaskSeed(seed + static_cast<uint64_t>(rank) * 0x9E3779B97F4A7C15ULL, step);
}

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

// --init from a run trained on other words than the data given.
std::invalid_argument otherInitData(const TrainConfig& t) {
  return std::invalid_argument("--init " + t.initRun + " was trained on other data than " + t.dataDir +
                               " (its words are the embedding's rows)");
}

// The vocabulary size and the default adaptive softmax, from the data; a run reading a tokenizer
// keeps its source's embedding, which must have a row for every id of the tokenizer.
void completeModelConfig(RunInfo& run, const TrainRequest& req, const Corpus& corpus, const Tokenizer* tokenizer) {
  if (tokenizer) {
    if (tokenizer->vocabSize() > run.model.vocabSize)
      throw std::runtime_error(fmt::format("the tokenizer of {} has ids up to {}, the model's embedding has {} rows",
                                           run.dir.string(), tokenizer->vocabSize() - 1, run.model.vocabSize));
    run.model.validate();
    return;
  }
  int64_t vocab = corpus.vocab.size() + run.model.specialTokens();  // encoders add <mask> [and <bos>]
  // An adapted run from the CLI has its source's vocabulary size; a scenario's is set here, and its
  // data is checked against the source's digest when the weights are copied.
  if (!req.resume && run.train.adapted() && run.model.vocabSize != 0 && run.model.vocabSize != vocab)
    throw otherInitData(run.train);
  if (req.resume && run.model.vocabSize != vocab)
    throw std::runtime_error(fmt::format("vocabulary mismatch: run {} has {} words, data {} gives {}", run.dir.string(),
                                         run.model.vocabSize, run.train.dataDir, vocab));
  run.model.vocabSize = vocab;
  if (req.defaultAdaptiveSoftmax && !req.resume && run.model.adaptiveSoftmaxCutoffs.empty())
    for (int64_t cutoff : {2000, 10000})
      if (cutoff < vocab) run.model.adaptiveSoftmaxCutoffs.push_back(cutoff);
  run.model.validate();
}

// Whether the steps are a DeviceStep's (train/device_step.h) as --cuda-graph asks, where this run
// allows it, and then whether captured; nullopt = TrainStep's. auto on a GPU says once why it does
// not capture; uncaptured where the step cannot apply is a one-line error.
std::optional<bool> deviceStepCapture(const std::string& cudaGraph, Transformer& model, const TrainConfig& t,
                                      const DistGroup& group) {
  if (cudaGraph != "auto" && cudaGraph != "uncaptured") return std::nullopt;
  std::string why = DeviceStep::unsupported(model, t);
  if (cudaGraph == "uncaptured") {
    if (!why.empty()) throw std::invalid_argument("--cuda-graph uncaptured: " + why);
    return false;
  }
  if (why.empty()) why = DeviceStep::uncapturable(model);
  if (why.empty()) return true;
  if (model->device().is_cuda() && group.isRoot())
    std::fprintf(stderr, "xtrap: --cuda-graph auto: the training step is not captured: %s\n", why.c_str());
  return std::nullopt;
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
  std::optional<RunInfo> source;  // --init: the run or pretrained directory the weights come from
  if (!req.resume && t.adapted()) {
    source = readInitSource(t.initRun);
    checkInitSource(*source, t);
    if (!source->pretrained.empty()) {
      run.tokenizerFamily = source->pretrained;
      run.contextToken = source->contextToken;
      run.stopTokens = source->stopTokens;
    }
  }
  // A run from a pretrained directory reads its data through that directory's tokenizer.json: the
  // source's at the start, the copy in its own directory from then on.
  std::optional<Tokenizer> tokenizer;
  if (run.readsTokenizer()) tokenizer = Tokenizer::fromFile((source ? source->dir : run.dir) / "tokenizer.json");
  Corpus corpus = tokenizer ? loadTokenizedCorpus(t.dataDir, *tokenizer, run.contextToken) : loadWikiText(t.dataDir);
  completeModelConfig(run, req, corpus, tokenizer ? &*tokenizer : nullptr);
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
  if (B % (group.world() * t.accumulate) != 0) {
    std::string parts = group.world() > 1 ? fmt::format("over {} ranks", group.world()) : "";
    if (t.accumulate > 1)
      parts += fmt::format("{}into {} micro-batches{} (--accumulate)", parts.empty() ? "" : " ", t.accumulate,
                           group.world() > 1 ? " each" : "");
    throw std::invalid_argument(fmt::format("the batch of {} sequences does not split evenly {}", B, parts));
  }
  // The cluster shares of the first 4M tokens: the whole split would page all of a large mapped
  // corpus into this process for an estimate (MFU) that a sample gives as well.
  TokenSpan sample = corpus.train.subspan(0, std::min<size_t>(corpus.train.size(), size_t(1) << 22));
  double stepFlops = trainStepFlops(run.model, B, t.maskProb, adaptiveClusterShares(run.model, sample));

  // Retrieval prompts mixed into the batches (data/task_mix.h), natural filler from the train split;
  // a task whose prompts do not fit fails here, before the run directory is touched. The prompts
  // fill a training sequence; the probe of every validation asks them at L (a decoder's sequence
  // is L inputs and one more target), so L is what must fit.
  const int64_t taskProbeLength = run.model.causal() ? L : sequenceSpan(run.model);
  const TaskMix taskMix = parseTaskMix(t.taskMix);
  const Filler taskFiller = parseFiller(t.taskFiller);
  std::optional<RetrievalPromptBuilder> taskBuilder;
  if (!taskMix.empty()) {
    taskBuilder.emplace(tokenizer ? tokenizerPhraseEncoder(*tokenizer) : wordPhraseEncoder(corpus.vocab), corpus.train);
    checkTaskMixFits(taskMix, *taskBuilder, taskProbeLength);
  }

  Transformer model(run.model);
  model->place(exec);  // before the optimizer and the gradient hooks see the parameters
  if (source) {
    if (!source->dataDigest.empty() && source->dataDigest != digest) throw otherInitData(t);
    t.initDigest = checkpointDigest(*source);  // run.json: the bytes this run started from
    Transformer sourceModel = loadTrainedModel(*source, exec);
    copySourceWeights(model, sourceModel);
  }
  model->setFusedElementwise(req.fusedElementwise);
  MlmTokens mlm = run.model.mlmTokens(corpus.vocab);
  // Before the run directory is touched: a --cuda-graph that cannot apply leaves nothing behind.
  const std::optional<bool> capture = deviceStepCapture(req.cudaGraph, model, t, group);
  TrainStep trainStep(model, t, group, /*forDeviceStep=*/capture.has_value());
  std::unique_ptr<DeviceStep> deviceStep;
  if (capture)
    deviceStep =
        std::make_unique<DeviceStep>(model, t, trainStep.optimizer(), group, *capture,
                                     req.graphAllreduce == "inside" ? GraphAllreduce::Inside : GraphAllreduce::Outside);
  BlockSampler sampler(static_cast<int64_t>(corpus.train.size()), sequenceSpan(run.model), t.batchOrder == "contiguous",
                       t.seed);
  if (root) torch::manual_seed(t.seed);
  auto taskRows = [&](int64_t step) {
    TaskRows rows;
    for (int64_t b = 0; taskBuilder && b < B; ++b)
      rows.push_back(taskSequence(taskMix, taskFiller, *taskBuilder, t.seed, step, b, sequenceSpan(run.model)));
    return rows;
  };
  model->train();
  RunRecorder recorder(run, root, exec.device);
  TrainingState state = recorder.begin(req.resume, model, trainStep.optimizer(), sampler);
  if (root && source && tokenizer) copyPretrainedSourceFiles(*source, run.dir);
  trainStep.optimizer().keepOwnRows();  // a checkpoint holds every rank's moments
  const std::string outOfMemoryDoing =
      fmt::format("training on {}, {} sequences of {} tokens a step,", exec.deviceName(), B, L);
  const std::string outOfMemoryRemedy =
      "lower --batch, or --batch-tokens when --batch is 0 (the step then sees fewer sequences)";
  const int64_t badStepsBefore = state.badSteps;  // a DeviceStep counts this session's
  // A DeviceStep's counters into the state and the optimizer: a host read, only when needed.
  auto readDeviceStep = [&] {
    DeviceStep::Reading r = deviceStep->read();
    int64_t skipped = badStepsBefore + r.badSteps - state.badSteps;  // since the last read
    state.badSteps += skipped;
    trainStep.optimizer().storeDeviceStepCount();
    return std::make_pair(r, skipped);
  };
  auto checkpoint = [&] {
    if (deviceStep) readDeviceStep();
    trainStep.optimizer().gatherStateToRoot();
    recorder.checkpoint(state, model, trainStep.optimizer(), sampler);
    trainStep.optimizer().keepOwnRows();
  };
  auto start = std::chrono::steady_clock::now();
  int64_t tokensThisSession = 0;
  double lastLoss = NAN, lastVal = NAN, tokPerSec = 0;
  std::optional<ProgressBar> bar;
  if (req.progress && root) bar.emplace(fmt::format("train {}", run.dir.filename().string()), totalSteps);

  while (state.step < totalSteps) {
    if (!root) torch::manual_seed(rankDropoutSeed(t.seed, group.rank(), state.step));
    double lr = learningRate(t, state.step, totalSteps);
    const int64_t done = state.step + 1;  // steps done after this one
    const bool injectNan = req.injectNanAtSteps.count(done) > 0;
    bool doEval = t.evalEvery > 0 && done % t.evalEvery == 0 && done < totalSteps;
    TrainStep::Outcome step;
    bool observed = true;  // `step` holds this step's loss and gradient norm
    if (deviceStep) {
      withOutOfMemoryAdvice(outOfMemoryDoing, outOfMemoryRemedy, [&] {
        deviceStep->run(corpus.train, sampler.next(B), lr, injectNan, taskRows(state.step));
      });
      // A checkpoint step too: the skipped steps it saves are then counted (and logged, and checked
      // against --max-bad-steps) at their own read.
      observed = done % t.logEvery == 0 || doEval || done == totalSteps || done % t.checkpointEvery == 0;
      if (observed) {
        auto [r, skipped] = readDeviceStep();
        step.loss = r.loss;
        step.gradNorm = r.gradNorm;
        step.bad = skipped > 0;
        step.stopSignal = r.stopSignal;
      }
    } else {
      step = withOutOfMemoryAdvice(outOfMemoryDoing, outOfMemoryRemedy, [&] {
        return trainStep.run(corpus.train, sampler.next(B), state.step, lr, mlm, injectNan, taskRows(state.step));
      });
      if (step.bad) ++state.badSteps;
    }
    ++state.step;
    state.tokensSeen += B * L;
    tokensThisSession += B * L;
    if (observed) lastLoss = step.loss;
    double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    tokPerSec = double(tokensThisSession) / std::max(elapsed, 1e-9);

    nlohmann::json tasks;
    if (doEval) {
      lastVal = validationLoss(model, corpus, t, group);
      if (taskBuilder) tasks = taskProbe(model, taskMix, taskFiller, *taskBuilder, taskProbeLength, mlm, group);
    }
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
      if (!tasks.is_null()) line["tasks"] = tasks;
      recorder.log(line);
    }
    if (bar)
      bar->update(state.step, fmt::format("loss {:.3f}{} | {:.0f} tok/s {:.1f} GFLOP/s", lastLoss,
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
  nlohmann::json last = {{"step", state.step}, {"tokens", state.tokensSeen}, {"val_loss", lastVal}};
  if (taskBuilder) last["tasks"] = taskProbe(model, taskMix, taskFiller, *taskBuilder, taskProbeLength, mlm, group);
  recorder.log(last);
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
               // How the steps ran (--cuda-graph): a CUDA graph, op by op without host reads, or
               // with the loss and gradient norm read on the host every step.
               {"train_step", !deviceStep              ? "host"
                              : deviceStep->captured() ? "captured"
                                                       : "uncaptured"},
               // Gradient buckets, and how many of them the last step all-reduced during backward (a
               // DeviceStep all-reduces one buffer after it).
               {"allreduce_buckets", deviceStep ? deviceStep->allreduces() : trainStep.gradientSync().buckets()},
               {"allreduce_buckets_overlapped", deviceStep ? 0 : trainStep.gradientSync().bucketsOverlapped()},
               {"flop_per_s", tokPerSec / double(B * L) * stepFlops},
               // AdamW moments held by rank 0 (sharded over the ranks: about 1 / world each).
               {"optimizer_state_bytes", trainStep.optimizer().stateBytes()},
               {"parameters", parameterCount(model)}};
  recorder.record("finished", state.step);
  return run;
}

}  // namespace xtrap
