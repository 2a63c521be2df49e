#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <sstream>

#include "cli/commands.h"
#include "data/retrieval_prompt.h"
#include "dist/dist_env.h"
#include "dist/launcher.h"
#include "eval/depth_list.h"
#include "eval/evaluate_run.h"
#include "eval/lvalid_range.h"
#include "eval/plot.h"
#include "eval/retrieval_plot.h"
#include "eval/window_protocol.h"
#include "model/interpolation.h"
#include "run/run_directory.h"
#include "util/atomic_file.h"
#include "util/choices.h"
#include "util/execution_context.h"
#include "util/gnuplot.h"

namespace xtrap {

namespace {
std::vector<std::string> splitList(const std::string& s) {
  std::vector<std::string> items;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) items.push_back(item);
  return items;
}
}  // namespace

CommandAction addEvalCommand(CLI::App& cmd) {
  auto req = std::make_shared<EvalRequest>();
  auto runs = std::make_shared<std::vector<std::string>>();
  auto lvalid = std::make_shared<std::string>();
  auto mode = std::make_shared<std::string>("nonoverlap");
  auto interps = std::make_shared<std::string>("none");
  auto out = std::make_shared<std::string>();
  auto plot = std::make_shared<std::string>();
  auto perPosition = std::make_shared<std::string>();
  auto logSamples = std::make_shared<std::string>();
  auto noProgress = std::make_shared<bool>(false);
  auto nproc = std::make_shared<int>(1);
  req->positionBuckets = 64;
  auto depths = std::make_shared<std::string>("0..100:10");

  cmd.add_option("runs", *runs, "run directories (default: the most recent under runs/)");
  cmd.add_option("--Lvalid", *lvalid,
                 "lengths: N, A..B (doubling, B included), A..B:step, A..B*f, comma lists (default: L,2L,4L,8L)");
  cmd.add_option("--task", req->task,
                 "perplexity | " + retrievalTaskNames() +
                     " (retrieval: prompts of Lvalid tokens, one row per length and depth; docs/retrieval.md)")
      ->capture_default_str();
  cmd.add_option("--depths", *depths,
                 "retrieval: where the needle starts, in percent of the filler before it (kv-lines: of the lines); "
                 "N, A..B:s, comma lists")
      ->capture_default_str();
  cmd.add_option("--trials", req->trials, "retrieval: prompts per (Lvalid, depth) cell")->capture_default_str();
  cmd.add_option("--filler", req->filler,
                 "retrieval tasks but kv-lines: repeat (the grass-is-green sentences) | natural (text of the "
                 "evaluation split)")
      ->capture_default_str();
  cmd.add_option("--prompt-seed", req->promptSeed, "retrieval: prompts are a function of (seed, Lvalid, depth, trial)")
      ->capture_default_str();
  cmd.add_option("--format", req->format,
                 "retrieval: words (xtrap's prompts in words) | native (pretrained models: Landmark's passkey and "
                 "LongEval's lines text, contiguous numbers, scored by generation)")
      ->capture_default_str();
  cmd.add_option("--score", req->score,
                 "retrieval: teacher (teacher-forced answer tokens, all argmax-right) | generate (greedy generation "
                 "with a KV cache, one prompt at a time; right when every answer item is in the text)")
      ->capture_default_str();
  cmd.add_option("--max-new-tokens", req->maxNewTokens,
                 "generation: tokens generated per prompt (0 = the answer's length; native: 10 for passkey as "
                 "Landmark, 15 for kv-lines as LongEval)")
      ->capture_default_str();
  cmd.add_option("--split", req->split,
                 "train | valid | test: the split scored (retrieval: the natural filler's text; pretrained models "
                 "read wiki.<split>.raw or .tokens of --data)")
      ->capture_default_str();
  cmd.add_option("--data", req->dataDir,
                 "WikiText-format directory (default: the run's training data; pretrained models read its "
                 "wiki.<split>.raw, else .tokens)");
  cmd.add_option("--text", req->textFile,
                 "pretrained models (a Hugging Face directory): a UTF-8 text file to score, tokenized by its "
                 "tokenizer.json");
  cmd.add_option("--mode", *mode,
                 "nonoverlap | sliding | both | pll (encoders: pseudo-log-likelihood, each token masked alone)")
      ->capture_default_str();
  cmd.add_option("--stride", req->stride, "sliding / strided stride S >= 1 (default: L_train / 2)");
  cmd.add_option("--protocol", req->protocol,
                 joinNames(windowProtocolNames(), " | ") +
                     ": the windows (docs/evaluation.md, Protocols): xtrap's own (--mode); llama-perplexity's "
                     "chunks scoring their second half; lm-evaluation-harness's rolling windows per document with "
                     "its word and byte counts; Hugging Face's strided loop (--stride, --window-bos)")
      ->capture_default_str();
  cmd.add_flag("--window-bos", req->windowBos,
               "--protocol strided: the context token (bos) before each window's Lvalid - 1 tokens, as YaRN's eval "
               "(default: none, as Hugging Face's guide)");
  cmd.add_option("--kl-base", req->klBase,
                 "compare every row (retrieval: teacher-forced answers) with a base scored on the same windows: an "
                 "interpolation name (the same run "
                 "under it, e.g. none) or a run / pretrained directory with the same tokenizer; adds mean, 99th and "
                 "99.9th percentile and max KL(base || model), the same-top-token rate and ppl / ppl(base)");
  cmd.add_option("--train-length", req->trainLength,
                 "pretrained models: the length they were trained at, where config.json does not record it "
                 "(the interpolation factor and the rows' L_train; default: from config.json)");
  cmd.add_option("--interp", *interps,
                 "comma list of " + joinNames(interpNames(), " ") + " (yarn, dynamic-yarn: rotary only)")
      ->capture_default_str();
  cmd.add_option(
      "--scale", req->scale,
      "linear / ntk / yarn: the fixed factor a >= 1 for the whole sweep (default: longest Lvalid / L_train)");
  cmd.add_flag("--scale-per-length", req->scalePerLength,
               "linear / ntk / yarn: a = Lvalid / L_train for each length (the NTK-ALiBi authors' protocol) instead "
               "of one a for the sweep");
  auto ntkHeads = std::make_shared<std::string>("all");
  cmd.add_option("--ntk-heads", *ntkHeads,
                 "ALiBi ntk / dynamic-ntk: " + joinNames(ntkHeadsNames()) +
                     " (all: rank every slope; leading-power-of-two: scale only the first 2^floor(log2 H) heads, "
                     "as keezen/ntk_alibi's code)")
      ->capture_default_str();
  cmd.add_option("--a0", req->a0,
                 "dynamic-ntk / dynamic-yarn: a = max(a0 * len / L_train, 1) for a window of len tokens")
      ->capture_default_str();
  auto extensions = std::make_shared<std::string>("none");
  cmd.add_option("--extend", *extensions,
                 "training-free context extension, comma list of " + joinNames(extensionMethodNames(), " ") +
                     " or METHOD+logn (encoders: self-extend, rerope, leaky-rerope, logn); one row per "
                     "interpolation and extension (docs/position-methods.md)")
      ->capture_default_str();
  addExtensionSettingOptions(cmd, req->extensionSettings);
  cmd.add_option("--max-tokens", req->maxTokens, "score only the first N tokens of the split (0 = all)")
      ->capture_default_str();
  cmd.add_option("--batch", req->batch, "windows per forward pass")->capture_default_str();
  cmd.add_option("--nproc", *nproc, "score with N local processes (ranks split the windows)")->capture_default_str();
  cmd.add_option("--query-block", req->queryBlock, "attention query block (0 = full matrix)")->capture_default_str();
  cmd.add_option("--per-position", *perPosition, "write mean NLL by position inside the window to this CSV");
  cmd.add_option("--buckets", req->positionBuckets, "position buckets for --per-position")->capture_default_str();
  cmd.add_option("--log-samples", *logSamples,
                 "write a JSON line per retrieval trial (prompt, needle position, gold and predicted answer, each "
                 "answer token's correctness and log-probability) or per document of each perplexity row (NLL, "
                 "tokens) to this .jsonl file (docs/retrieval.md, Samples)");
  cmd.add_option("--log-trials", req->logTrials,
                 "--log-samples of retrieval: only the first N trials of each cell (0 = all)")
      ->capture_default_str();
  cmd.add_option("--out", *out, "results file, .csv or .json (default: <run>/eval.csv)");
  cmd.add_option("--plot", *plot,
                 "draw perplexity vs Lvalid into this PNG and ppl / ppl(L) into NAME-ratio.png; retrieval: the depth x "
                 "Lvalid accuracy heatmaps, one panel per run and interpolation (gnuplot)");
  cmd.add_option("--threads", req->threads, "intra-op threads (0 = all cores)")->capture_default_str();
  cmd.add_option("--device", req->device, std::string(kDeviceNames) + " (auto: CUDA when present)")
      ->capture_default_str();
  cmd.add_option("--dtype", req->dtype, std::string(kDtypeNames) + " compute precision (bfloat16: autocast)")
      ->capture_default_str();
  cmd.add_flag("--verbose", req->verbose, "print the slopes / rotary settings used at every Lvalid");
  cmd.add_flag("--no-progress", *noProgress, "no progress bar");

  return [=, &cmd] {
    // An option that does not apply is an error, never silently ignored.
    std::vector<std::string> interpNames = splitList(*interps);
    auto asked = [&](const char* name) {
      return std::find(interpNames.begin(), interpNames.end(), name) != interpNames.end();
    };
    parseWindowProtocol(req->protocol);  // a bad name is named before anything else
    bool xtrapWindows = req->protocol == "xtrap";
    rejectUnless(cmd, {"--mode"}, xtrapWindows, "applies to --protocol xtrap (the other protocols fix their windows)");
    rejectUnless(cmd, {"--stride"}, (xtrapWindows && *mode != "nonoverlap") || req->protocol == "strided",
                 "applies to --mode sliding or both, and to --protocol strided");
    rejectUnless(cmd, {"--window-bos"}, req->protocol == "strided", "applies to --protocol strided");
    rejectUnless(cmd, {"--scale"}, asked("linear") || asked("ntk") || asked("yarn"),
                 "applies to --interp linear, ntk and yarn");
    rejectUnless(cmd, {"--scale-per-length"}, asked("linear") || asked("ntk") || asked("yarn"),
                 "applies to --interp linear, ntk and yarn");
    rejectUnless(cmd, {"--scale"}, !req->scalePerLength, "and --scale-per-length exclude each other");
    rejectUnless(cmd, {"--a0"}, asked("dynamic-ntk") || asked("dynamic-yarn"),
                 "applies to --interp dynamic-ntk and dynamic-yarn");
    rejectUnless(cmd, {"--ntk-heads"}, asked("ntk") || asked("dynamic-ntk"), "applies to --interp ntk and dynamic-ntk");
    rejectUnless(cmd, {"--buckets"}, !perPosition->empty(), "applies with --per-position");
    rejectUnless(cmd, {"--log-trials"}, !logSamples->empty(), "applies with --log-samples");
    bool retrieval = req->task != "perplexity";
    if (retrieval) parseRetrievalTask(req->task);  // a bad name is named before anything else
    rejectUnless(cmd, {"--depths", "--trials", "--prompt-seed", "--format", "--score"}, retrieval,
                 "applies to the retrieval tasks");
    if (req->format != "words" && req->format != "native")
      throw std::invalid_argument("unknown --format '" + req->format + "' (valid: words, native)");
    if (req->score != "teacher" && req->score != "generate")
      throw std::invalid_argument("unknown --score '" + req->score + "' (valid: teacher, generate)");
    if (req->format == "native" && cmd.count("--score") && req->score != "generate")
      throw std::invalid_argument(
          "--format native is scored by generation, as its authors score it (--score generate)");
    if (req->format == "native" && req->task != "passkey" && req->task != "kv-lines")
      throw std::invalid_argument("--format native builds passkey (Landmark's) and kv-lines (LongEval's) prompts");
    rejectUnless(cmd, {"--max-new-tokens"}, req->generates(), "applies to --score generate and --format native");
    if (req->maxNewTokens < 0) throw std::invalid_argument("--max-new-tokens must be >= 0");
    rejectUnless(cmd, {"--filler"}, retrieval && usesFiller(parseRetrievalTask(req->task)) && req->format == "words",
                 "applies to the retrieval tasks but kv-lines, in --format words");
    rejectUnless(cmd, {"--mode", "--stride", "--per-position", "--protocol", "--window-bos"}, !retrieval,
                 "applies to --task perplexity (retrieval scores whole prompts)");
    rejectUnless(cmd, {"--text"}, cmd.count("--data") == 0, "and --data are alternatives: give one");
    rejectUnless(cmd, {"--max-tokens"}, !retrieval || req->filler == "natural",
                 "with retrieval, applies to --filler natural (the text the filler is drawn from)");
    parseFiller(req->filler);
    if (req->trials < 1) throw std::invalid_argument("--trials must be >= 1");
    if (req->logTrials < 0) throw std::invalid_argument("--log-trials must be >= 0");
    rejectUnless(cmd, {"--log-trials"}, retrieval, "applies to the retrieval tasks");
    req->depths = parseDepthList(*depths);
    if (cmd.count("--scale") && !(req->scale >= 1)) throw std::invalid_argument("--scale must be >= 1");
    if (!(req->a0 > 0)) throw std::invalid_argument("--a0 must be > 0");
    makeExecutionContext(req->device, req->dtype);  // a bad name, or cuda without CUDA, fails before any rank starts
    if (*nproc != 1 && !insideDistributedJob()) return launchLocalRanks(*nproc);
    bool root = distEnvFromEnvironment().rank == 0;  // rank 0 alone prints and writes
    EvalRequest r = *req;
    r.ntkHeads = parseNtkHeads(*ntkHeads);
    r.progress = !*noProgress && root;
    r.logSamples = !logSamples->empty();
    if (runs->empty()) runs->push_back(latestRunDir(kRunsRoot).string());
    for (const auto& run : *runs) r.runs.emplace_back(run);
    if (*mode == "both")
      r.modes = {"nonoverlap", "sliding"};
    else
      r.modes = {*mode};
    for (const auto& m : r.modes)
      if (m != "nonoverlap" && m != "sliding" && m != "pll")
        throw std::invalid_argument("unknown --mode '" + *mode + "' (valid: nonoverlap, sliding, both, pll)");
    if (req->stride < 0) throw std::invalid_argument("--stride must be >= 1");
    if (req->maxTokens < 0) throw std::invalid_argument("--max-tokens must be >= 0");
    if (req->batch < 1) throw std::invalid_argument("--batch must be >= 1");
    if (cmd.count("--train-length") && req->trainLength < 1) throw std::invalid_argument("--train-length must be >= 1");
    if (req->positionBuckets < 1) throw std::invalid_argument("--buckets must be >= 1");
    r.interps.clear();
    for (const auto& name : interpNames) r.interps.push_back(parseInterp(name));
    r.extensions = splitList(*extensions);
    checkExtensionSettingsUsed(r.extensions, r.extensionSettings);
    for (const auto& run : r.runs) readRunInfo(run);  // a missing run is named before any output check
    if (lvalid->empty()) {
      int64_t L = readRunInfo(r.runs.front()).model.contextLength;
      r.lvalids = {L, 2 * L, 4 * L, 8 * L};
    } else {
      r.lvalids = parseLvalidRange(*lvalid);
    }
    std::filesystem::path outFile = out->empty() ? r.runs.front() / "eval.csv" : std::filesystem::path(*out);
    for (const auto& file : {outFile.string(), *perPosition, *plot, *logSamples})
      if (!file.empty()) requireWritableDirectoryFor(file);
    // A requested picture that cannot be drawn fails before the evaluation, not after it.
    if (!plot->empty() && !gnuplotAvailable()) throw std::runtime_error(plotterMissingMessage(*plot));
    std::vector<PositionLossRow> positions;
    if (perPosition->empty()) r.positionBuckets = 0;
    std::vector<std::string> samples;
    auto rows = evaluateRuns(r, perPosition->empty() ? nullptr : &positions, r.logSamples ? &samples : nullptr);
    if (!root) return;
    std::fputs(formatEvalTable(rows).c_str(), stdout);
    writeEvalRows(outFile, rows);
    std::fprintf(stderr, "results: %s\n", outFile.c_str());
    if (r.logSamples) {
      std::string lines;
      for (const auto& line : samples) lines += line + "\n";
      writeTextAtomically(*logSamples, lines);
      std::fprintf(stderr, "samples: %s (%zu lines)\n", logSamples->c_str(), samples.size());
    }
    if (!perPosition->empty()) {
      writePositionRows(*perPosition, positions);
      std::fprintf(stderr, "per-position NLL: %s\n", perPosition->c_str());
    }
    if (!plot->empty()) {
      if (r.retrieval()) {
        plotRetrievalHeatmaps(*plot, rows);
        std::fprintf(stderr, "heatmaps: %s\n", plot->c_str());
      } else {
        plotPerplexity(*plot, rows, "perplexity vs evaluation length");
        std::fprintf(stderr, "plot: %s and %s\n", plot->c_str(), ratioPlotPath(*plot).c_str());
      }
    }
  };
}

}  // namespace xtrap
