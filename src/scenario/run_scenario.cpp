#include "scenario/run_scenario.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <stdexcept>
#include <thread>

#include "attention_dump.h"
#include "bias_dump.h"
#include "data/retrieval_prompt.h"
#include "data/wikitext.h"
#include "dist/dist_env.h"
#include "dist/dist_group.h"
#include "eval/encoder_score.h"
#include "eval/evaluate_run.h"
#include "eval/plot.h"
#include "eval/retrieval_plot.h"
#include "run/checkpoint.h"
#include "run/checkpoint_file.h"
#include "run/run_lock.h"
#include "scenario/cost_model.h"
#include "scenario/results_table.h"
#include "train/trainer.h"
#include "util/atomic_file.h"
#include "util/execution_context.h"
#include "util/interrupt.h"
#include "util/runtime.h"

namespace xtrap {
namespace fs = std::filesystem;

namespace {

using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Where and in what precision a variant runs: its device and dtype keys, auto resolved here
// (under torchrun LOCAL_RANK picks the GPU).
ExecutionContext variantContext(const ScenarioVariant& v) {
  return makeExecutionContext(v.train.device, v.train.dtype, distEnvFromEnvironment().localRank);
}

// The scenario with every variant's device resolved (auto -> cpu or cuda), as run.json records
// it: the run identity, and so the run directory, depend on the resolved device. A run checks
// every variant's device before it starts; a dry run only lists, so a scenario that names cuda
// can be planned on a machine without one.
// Adapted variants (`init`) then name their source's run identity and directory.
Scenario withResolvedDevices(const Scenario& given, const fs::path& runsRoot, bool dryRun) {
  Scenario s = given;
  for (ScenarioVariant& v : s.variants)
    if (!dryRun || v.train.device == "auto") v.train.device = variantContext(v).deviceName();
  linkInitSources(s);
  for (ScenarioVariant& v : s.variants) {
    if (!v.adapted()) continue;
    const ScenarioVariant& source = *s.select({v.initVariant}).front();
    v.train.initRun = source.pretrained() ? source.pretrainedDir : variantRunDir(runsRoot, source).string();
  }
  return s;
}

std::string formatDuration(double seconds) {
  if (seconds < 90) return fmt::format("{:.0f} s", seconds);
  if (seconds < 5400) return fmt::format("{:.1f} min", seconds / 60);
  return fmt::format("{:.1f} h", seconds / 3600);
}

// The state of a variant's run directory right now.
struct TrainPlan {
  fs::path dir;
  std::string action;  // train | resume | reuse
  int64_t stepsDone = 0, totalSteps = 0;
};

TrainPlan planTraining(const fs::path& runsRoot, const ScenarioVariant& v) {
  TrainPlan p;
  p.dir = variantRunDir(runsRoot, v);
  p.totalSteps = v.train.totalSteps(v.model.contextLength);
  p.action = "train";
  if (!fs::exists(p.dir / "run.json")) return p;
  RunInfo info = readRunInfo(p.dir);
  if (runIdentity(info.model, info.train) != runIdentity(v.model, v.train))
    throw std::runtime_error("run directory " + p.dir.string() + " holds a different run than variant '" + v.label() +
                             "' (remove it)");
  p.stepsDone = info.stepsDone;
  p.action = info.status == "finished" ? "reuse" : "resume";
  return p;
}

// Rows already computed for the same run, checkpoint and evaluation settings. A pretrained
// variant's rows are keyed by its pretrainedIdentity and kept in its own directory under the runs
// root (variantRunDir), never in the model's directory.
fs::path evalCacheFile(const ScenarioVariant& v, const fs::path& runsRoot, const RunInfo& run, const EvalRequest& r) {
  std::vector<std::string> interps;
  for (Interp i : r.interps) interps.push_back(interpLabel(i, r.ntkHeads, r.scalePerLength));
  nlohmann::json key = {{"run", v.pretrained() ? pretrainedIdentity(v) : runIdentity(run.model, run.train)},
                        {"steps", run.stepsDone},
                        {"lvalids", r.lvalids},
                        {"split", r.split},
                        {"modes", r.modes},
                        {"stride", r.stride},
                        {"interps", interps},
                        {"max_tokens", r.maxTokens}};
  if (!run.model.causal()) key["encoder_scoring"] = kEncoderScoringVersion;
  if (r.scale > 0) key["scale"] = r.scale;  // only where given, so caches written before it stay valid
  // Only with an extension, so caches written before it stay valid.
  if (r.extensions != std::vector<std::string>{"none"}) {
    std::vector<std::string> labels;
    for (const auto& name : r.extensions)
      labels.push_back(resolveContextExtension(name, r.extensionSettings, run.model.contextLength).label());
    key["extend"] = labels;
  }
  if (r.retrieval())
    key["retrieval"] = {{"task", r.task},
                        {"depths", r.depths},
                        {"trials", r.trials},
                        {"filler", r.filler},
                        {"prompt_seed", r.promptSeed},
                        {"batch", r.batch},
                        {"version", kRetrievalPromptVersion}};
  // The device and precision of the evaluation are the run's own (in its identity when not cpu,
  // float32), so caches written before they existed stay valid.
  fs::path dir = v.pretrained() ? variantRunDir(runsRoot, v) : run.dir;
  return dir / "scenario-evals" / fmt::format("{:016x}.json", fnv1a64(key.dump()));
}

// One evaluation job: a variant scored under one eval block's mode and stride.
struct EvalJob {
  size_t block;
  const ScenarioVariant* variant;
  std::string mode;
  int64_t stride;  // 0 = L_train / 2 (sliding); unused for nonoverlap
};

std::vector<EvalJob> evalJobs(const Scenario& s) {
  std::vector<EvalJob> jobs;
  for (size_t b = 0; b < s.evals.size(); ++b) {
    const ScenarioEval& e = s.evals[b];
    for (const std::string& mode : e.modes) {
      std::vector<int64_t> strides = mode == "sliding" && !e.strides.empty() ? e.strides : std::vector<int64_t>{0};
      for (int64_t stride : strides)
        for (const ScenarioVariant* v : s.select(e.variants)) jobs.push_back({b, v, mode, stride});
    }
  }
  return jobs;
}

EvalRequest evalRequest(const Scenario& s, const EvalJob& job, const RunInfo& info, bool progress) {
  const ScenarioEval& e = s.evals[job.block];
  EvalRequest r;
  r.runs = {info.dir};
  if (job.variant->pretrained()) {
    r.dataDir = job.variant->train.dataDir;  // a trained run reads its own
    r.trainLength = job.variant->model.contextLength;
  }
  r.lvalids = e.lvalids;
  r.split = e.split;
  r.modes = {job.mode};
  r.stride = job.stride;
  r.interps = e.interps;
  r.extensions = e.extensions;
  r.extensionSettings = e.extensionSettings;
  r.ntkHeads = e.ntkHeads;
  r.scalePerLength = e.scalePerLength;
  r.scale = e.scale;
  r.maxTokens = e.maxTokens;
  r.batch = e.batch;
  r.task = e.task;
  r.depths = e.depths;
  r.trials = e.trials;
  r.filler = e.filler;
  r.promptSeed = e.promptSeed;
  r.threads = job.variant->train.threads;
  r.device = job.variant->train.device;
  r.dtype = job.variant->train.dtype;
  r.progress = progress;
  return r;
}

// The run a variant's evaluations and probes load: its trained run, or the pretrained model.
RunInfo variantRunInfo(const fs::path& runsRoot, const ScenarioVariant& v) {
  RunInfo info = readRunInfo(v.pretrained() ? fs::path(v.pretrainedDir) : variantRunDir(runsRoot, v));
  if (v.pretrained()) setTrainLength(info, v.model.contextLength);
  return info;
}

int64_t effectiveStride(const EvalJob& job, int64_t Lvalid) {
  if (job.mode != "sliding") return Lvalid;  // nonoverlap, pll
  return std::clamp<int64_t>(job.stride > 0 ? job.stride : job.variant->model.contextLength / 2, 1, Lvalid);
}

std::string jobLabel(const ScenarioEval& e, const EvalJob& job) {
  if (e.retrieval()) return e.task == "passkey" ? "passkey " + e.filler : e.task;
  return job.mode == "sliding"
             ? fmt::format("sliding s={}", job.stride > 0 ? job.stride : job.variant->model.contextLength / 2)
             : job.mode;
}

int64_t vocabularySize(const ScenarioVariant& v, std::map<std::string, int64_t>& cache) {
  auto it = cache.find(v.train.dataDir);
  if (it == cache.end()) it = cache.emplace(v.train.dataDir, int64_t(loadWikiText(v.train.dataDir).vocab.size())).first;
  return it->second + (v.model.causal() ? 0 : 1);
}

void printDryRun(const Scenario& s, const ScenarioRunOptions& o) {
  std::map<std::string, int64_t> vocabs;
  std::map<std::string, int64_t> splitTokens;  // "dir|split" -> tokens
  double total = 0;
  fmt::print("scenario {}: {} variant(s), {} eval block(s){}\n", s.name, s.variants.size(), s.evals.size(),
             s.description.empty() ? "" : "\n  " + s.description);
  fmt::print("train:\n");
  for (const auto& v : s.variants) {
    if (v.pretrained()) {
      fmt::print("  {:<20} {:<46} {:<34} -\n", v.label(), v.pretrainedDir,
                 fmt::format("pretrained {}: nothing to train", v.pretrainedType));
      continue;
    }
    TrainPlan p = planTraining(o.runsRoot, v);
    int64_t perStep = v.train.sequencesPerStep(v.model.contextLength) * v.model.contextLength;
    int64_t stepsLeft = p.action == "reuse" ? 0 : p.totalSteps - p.stepsDone;
    double sec = estimateTrainSeconds(v.model, vocabularySize(v, vocabs), stepsLeft * perStep, v.train.maskProb,
                                      v.train.threads);
    total += sec;
    std::string what = p.action == "reuse"    ? fmt::format("reuse (finished, {} steps)", p.stepsDone)
                       : p.action == "resume" ? fmt::format("resume at step {}/{}", p.stepsDone, p.totalSteps)
                                              : fmt::format("train {} steps x {} tokens", p.totalSteps, perStep);
    fmt::print("  {:<20} {:<46} {:<34} ~{}\n", v.label(), p.dir.string(), what, formatDuration(sec));
  }
  fmt::print("evaluate:\n");
  for (const EvalJob& job : evalJobs(s)) {
    const ScenarioEval& e = s.evals[job.block];
    const ScenarioVariant& v = *job.variant;
    if (v.pretrained()) {
      // Its tokens are counted when its tokenizer reads the text; the cost model is of xtrap's
      // own small models on a CPU: no estimate.
      RunInfo info = variantRunInfo(o.runsRoot, v);
      bool cached = fs::exists(evalCacheFile(v, o.runsRoot, info, evalRequest(s, job, info, false)));
      fmt::print("  {:<20} block {} {:<14} {}\n", v.label(), job.block + 1, jobLabel(e, job),
                 cached ? std::string("cached")
                        : fmt::format("Lvalid {}..{} ({} lengths) x {} interp(s), {} split of {}  (not estimated)",
                                      e.lvalids.front(), e.lvalids.back(), e.lvalids.size(),
                                      e.interps.size() * e.extensions.size(), e.split, v.train.dataDir));
      continue;
    }
    std::string key = v.train.dataDir + "|" + e.split;
    if (!splitTokens.count(key)) splitTokens[key] = int64_t(loadWikiText(v.train.dataDir).split(e.split).size());
    int64_t tokens = e.maxTokens > 0 ? std::min(e.maxTokens, splitTokens[key]) : splitTokens[key];
    fs::path dir = variantRunDir(o.runsRoot, v);
    if (planTraining(o.runsRoot, v).action == "reuse" &&
        fs::exists(evalCacheFile(v, o.runsRoot, readRunInfo(dir), evalRequest(s, job, readRunInfo(dir), false)))) {
      fmt::print("  {:<20} block {} {:<14} cached\n", v.label(), job.block + 1, jobLabel(e, job));
      continue;
    }
    double sec = 0;
    for (int64_t Lvalid : e.lvalids) {
      // A retrieval cell reads trials prompts of Lvalid tokens (its head scores only the answers).
      int64_t read = e.retrieval() ? e.trials * int64_t(e.depths.size()) * Lvalid : tokens;
      sec += double(e.interps.size() * e.extensions.size()) *
             estimateEvalSeconds(v.model, vocabularySize(v, vocabs), read, Lvalid, effectiveStride(job, Lvalid),
                                 v.train.maskProb, v.train.threads);
    }
    total += sec;
    fmt::print("  {:<20} block {} {:<14} Lvalid {}..{} ({} lengths) x {} interp(s), {} {} tokens  ~{}\n", v.label(),
               job.block + 1, jobLabel(e, job), e.lvalids.front(), e.lvalids.back(), e.lvalids.size(),
               e.interps.size() * e.extensions.size(), tokens, e.split, formatDuration(sec));
  }
  if (s.hasProbe) fmt::print("probe: {} variant(s)\n", s.select(s.probe.variants).size());
  // The estimates model this project's 2-core CPU machine (scenario/cost_model.h), not a GPU.
  auto onGpu = std::count_if(s.variants.begin(), s.variants.end(),
                             [](const ScenarioVariant& v) { return meansCuda(v.train.device); });
  fmt::print("total ~{}{}\n", formatDuration(total),
             onGpu == 0
                 ? ""
                 : fmt::format(" (CPU estimate: {} of {} variant(s) train on cuda, whose time it does not model)",
                               onGpu, s.variants.size()));
}

// Runs one stage of one variant; returns whether it worked (see runScenario).
using Attempt = std::function<bool(const std::string& stage, const std::string& variant, const std::function<void()>&)>;

void probeVariant(const Scenario& s, const ScenarioRunOptions& o, const fs::path& outDir, const ScenarioVariant& v) {
  RunInfo info = variantRunInfo(o.runsRoot, v);
  configureRuntime(v.train.threads);
  Transformer model = loadTrainedModel(info, variantContext(v));
  if (s.probe.biasLen > 0) dumpBias(model, s.probe.biasLen, outDir / "probe" / (v.label() + "-bias.h5"));
  if (s.probe.attnLvalid > 0) {
    AttentionDumpRequest r;
    r.out = outDir / "probe" / (v.label() + "-attn.h5");
    r.Lvalid = s.probe.attnLvalid;
    r.offset = s.probe.attnOffset;
    r.statsOnly = s.probe.statsOnly;
    dumpAttention(info, model, loadProbeText(info, "", v.pretrained() ? v.train.dataDir : "", r.split), r);
  }
}

std::string timestamp() {
  std::time_t now = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  return buf;
}

}  // namespace

fs::path runScenario(const Scenario& given, const ScenarioRunOptions& o) {
  const Scenario s = withResolvedDevices(given, o.runsRoot, o.dryRun);
  fs::path outDir = o.resultsRoot / s.name;
  if (o.dryRun) {
    printDryRun(s, o);
    return outDir;
  }
  // Under the torchrun contract every rank trains and evaluates (the collectives need them all);
  // rank 0 alone prints, writes the evaluation caches and results/NAME/, and runs the probes.
  DistGroup group;
  bool root = group.isRoot();
  // One `xtrap run` of a scenario at a time writes its results (a second one would interleave
  // its tables and manifest with the first's): the lock is taken before anything is trained.
  std::optional<RunLock> resultsLock;
  if (root) {
    fs::create_directories(outDir);
    resultsLock.emplace(outDir, "results directory");
  }
  auto started = Clock::now();
  std::string startedAt = timestamp();
  nlohmann::json manifest = {{"scenario", s.name}, {"xtrap_version", xtrapVersion()}, {"started", startedAt}};
  char host[256] = "";
  gethostname(host, sizeof(host) - 1);
  manifest["machine"] = {{"host", host}, {"cpu_threads", std::thread::hardware_concurrency()}};

  // On one rank a failing stage (training, an evaluation, a probe) is recorded and the others go
  // on, so the variants that worked still get their results and manifest.json lists what is
  // missing; with several ranks a failure stops the job (the other ranks would wait in a
  // collective). An interrupt always stops it.
  nlohmann::json missing = nlohmann::json::array();
  std::set<std::string> untrained;
  Attempt attempt = [&](const std::string& stage, const std::string& variant, const std::function<void()>& work) {
    if (group.world() > 1) {
      work();
      return true;
    }
    try {
      work();
      return true;
    } catch (const Interrupted&) {
      throw;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "%s: %s failed: %s\n", variant.c_str(), stage.c_str(), e.what());
      missing.push_back({{"variant", variant}, {"stage", stage}, {"error", e.what()}});
      return false;
    }
  };

  auto trainVariant = [&](const ScenarioVariant& v) {
    if (v.pretrained()) {
      // Nothing to train: the manifest says which model, by path and by weights digest.
      manifest["variants"][v.label()] = {{"run_dir", variantRunDir(o.runsRoot, v).string()},
                                         {"action", "pretrained"},
                                         {"model_dir", v.pretrainedDir},
                                         {"model_type", v.pretrainedType},
                                         {"weights_digest", v.weightsDigest},
                                         {"data", v.train.dataDir},
                                         {"device", v.train.device},
                                         {"dtype", v.train.dtype}};
      return;
    }
    TrainPlan p = planTraining(o.runsRoot, v);
    group.barrier();  // every rank has read the run directory before rank 0 starts writing it
    auto t0 = Clock::now();
    if (p.action == "reuse") {
      if (root) std::fprintf(stderr, "%s: reusing finished run %s\n", v.label().c_str(), p.dir.c_str());
    } else {
      if (root)
        std::fprintf(stderr, "%s: %s %s\n", v.label().c_str(), p.action == "resume" ? "resuming" : "training",
                     p.dir.c_str());
      TrainRequest req;
      req.model = v.model;
      req.train = v.train;
      req.runDir = p.dir;
      req.resume = p.action == "resume";
      req.progress = o.progress;
      trainRun(req);
    }
    RunInfo info = readRunInfo(p.dir);
    // run.json says which xtrap trained the run and how long its last session took, which a
    // re-run that only reuses it cannot know otherwise.
    auto runJson = nlohmann::json::parse(readTextFile(p.dir / "run.json"));
    manifest["variants"][v.label()] = {{"run_dir", p.dir.string()},
                                       {"action", p.action},
                                       {"device", v.train.device},
                                       {"dtype", v.train.dtype},
                                       {"steps", info.stepsDone},
                                       {"trained_by", runJson.value("xtrap_version", "")},
                                       {"train_seconds_last_session", info.extra.value("train_seconds", 0.0)},
                                       {"train_seconds_this_invocation", secondsSince(t0)},
                                       {"final_val_ppl", info.extra.value("final_val_ppl", 0.0)},
                                       {"train_tok_per_s", info.extra.value("tok_per_s", 0.0)}};
  };
  // Evaluation jobs in the order of the results (block, mode, stride, variant); a variant's jobs
  // run as soon as it is trained.
  const std::vector<EvalJob> jobs = evalJobs(s);
  std::vector<std::optional<std::vector<EvalRow>>> jobRows(jobs.size());  // set once scored
  auto evaluateJob = [&](size_t index) {
    const EvalJob& job = jobs[index];
    const ScenarioVariant& v = *job.variant;
    const ScenarioEval& e = s.evals[job.block];
    std::string stage = fmt::format("eval block {} {}", job.block + 1, jobLabel(e, job));
    if (untrained.count(v.label())) {
      missing.push_back({{"variant", v.label()}, {"stage", stage}, {"error", "not trained"}});
      return;
    }
    auto t0 = Clock::now();
    std::vector<EvalRow> rows;
    bool scored = attempt(stage, v.label(), [&] {
      RunInfo info = variantRunInfo(o.runsRoot, v);
      EvalRequest r = evalRequest(s, job, info, o.progress);
      fs::path cache = evalCacheFile(v, o.runsRoot, info, r);
      bool cached = fs::exists(cache);
      group.barrier();  // every rank has looked for the cache before rank 0 writes it
      if (cached) {
        rows = readEvalRows(cache);
      } else {
        if (root)
          std::fprintf(stderr, "%s: evaluating %s, Lvalid %lld..%lld\n", v.label().c_str(), jobLabel(e, job).c_str(),
                       static_cast<long long>(e.lvalids.front()), static_cast<long long>(e.lvalids.back()));
        rows = evaluateRuns(r);
        if (root) {
          fs::create_directories(cache.parent_path());
          writeEvalRows(cache, rows);
        }
      }
    });
    if (!scored) return;
    auto& entry = manifest["variants"][v.label()];
    entry["eval_seconds_this_invocation"] = entry.value("eval_seconds_this_invocation", 0.0) + secondsSince(t0);
    for (EvalRow& row : rows) {
      row.run = v.name;
      row.seed = int64_t(v.train.seed);
    }
    jobRows[index] = std::move(rows);
  };

  // results.csv and table.md from the jobs scored so far, in job order; returns the rows.
  auto writeResults = [&] {
    std::vector<EvalRow> all;
    bool anyPerplexity =
        std::any_of(s.evals.begin(), s.evals.end(), [](const ScenarioEval& e) { return !e.retrieval(); });
    bool anyRetrieval =
        std::any_of(s.evals.begin(), s.evals.end(), [](const ScenarioEval& e) { return e.retrieval(); });
    std::string tables = fmt::format(
        "# {}\n\n{}{}{}\n", s.name, s.description.empty() ? "" : s.description + "\n\n",
        anyPerplexity ? "Perplexity (lower is better); rows = variants, columns = Lvalid.\n" : "",
        anyRetrieval ? "Retrieval accuracy (higher is better, %); rows = variants and interpolations, columns = "
                       "Lvalid; every cell's 95% interval per depth is in results.csv.\n"
                     : "");
    std::map<std::string, std::vector<EvalRow>> sections;  // title -> rows, in job order via `order`
    std::vector<std::string> order;
    for (size_t i = 0; i < jobs.size(); ++i) {
      if (!jobRows[i]) continue;
      const ScenarioEval& e = s.evals[jobs[i].block];
      std::string title = fmt::format("{} ({} split{})", jobLabel(e, jobs[i]), e.split,
                                      e.maxTokens > 0 ? fmt::format(", first {} tokens", e.maxTokens) : "");
      if (s.evals.size() > 1) title = fmt::format("eval {}: {}", jobs[i].block + 1, title);
      if (!sections.count(title)) order.push_back(title);
      for (const EvalRow& row : *jobRows[i]) {
        all.push_back(row);
        sections[title].push_back(row);
      }
    }
    for (const auto& title : order)
      tables += sections[title].front().isRetrieval() ? formatRetrievalMarkdownTable(title, sections[title])
                                                      : formatMarkdownTable(title, sections[title]);
    fs::create_directories(outDir);
    writeEvalRows(outDir / "results.csv", all);
    writeTextAtomically(outDir / "table.md", tables);
    return all;
  };

  // Each variant is trained, then evaluated, then results/NAME/ is rewritten with every variant
  // finished so far (manifest.json saying which, and "complete": false): a run cut off (a device
  // call's time limit, a killed job) leaves their rows, and a second `xtrap run` reuses their runs
  // and evaluation caches.
  std::vector<EvalRow> all;  // rank 0: every row written so far
  for (const auto& v : s.variants) {
    if (!attempt("train", v.label(), [&] { trainVariant(v); })) untrained.insert(v.label());
    for (size_t i = 0; i < jobs.size(); ++i)
      if (jobs[i].variant == &v) evaluateJob(i);
    if (!root) continue;
    all = writeResults();
    manifest["complete"] = false;
    if (!missing.empty()) manifest["missing"] = missing;
    writeTextAtomically(outDir / "manifest.json", manifest.dump(2) + "\n");
  }
  if (!root) return outDir;

  // The numbers are written; a missing (or failing) plotter costs only the picture.
  std::vector<EvalRow> perplexityRows, retrievalRows;
  for (const EvalRow& row : all) (row.isRetrieval() ? retrievalRows : perplexityRows).push_back(row);
  try {
    if (!perplexityRows.empty() || retrievalRows.empty())
      plotPerplexity(outDir / "ppl_vs_length.png", perplexityRows, s.name + ": perplexity vs evaluation length");
    if (!retrievalRows.empty())
      plotRetrievalHeatmaps(outDir / "retrieval_heatmap.png", retrievalRows, s.name + ": retrieval accuracy (%)");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "warning: %s\n", e.what());
  }
  writeTextAtomically(outDir / "scenario.toml", s.text);
  writeTextAtomically(outDir / "version.txt", xtrapVersion() + "\n");
  if (s.hasProbe) {
    fs::create_directories(outDir / "probe");
    for (const ScenarioVariant* v : s.select(s.probe.variants))
      if (!untrained.count(v->label())) attempt("probe", v->label(), [&] { probeVariant(s, o, outDir, *v); });
  }
  manifest["finished"] = timestamp();
  manifest["wall_seconds_this_invocation"] = secondsSince(started);
  manifest["complete"] = missing.empty();
  if (!missing.empty()) manifest["missing"] = missing;
  writeTextAtomically(outDir / "manifest.json", manifest.dump(2) + "\n");
  if (!missing.empty())
    throw std::runtime_error(
        fmt::format("scenario {}: {} stage(s) failed (first: {} {}); the results of the rest and "
                    "the list of what is missing are in {}",
                    s.name, missing.size(), missing[0]["variant"].get<std::string>(),
                    missing[0]["stage"].get<std::string>(), (outDir / "manifest.json").string()));
  return outDir;
}

}  // namespace xtrap
