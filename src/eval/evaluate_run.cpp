#include "eval/evaluate_run.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <optional>
#include <stdexcept>

#include "data/text_tokens.h"
#include "data/wikitext.h"
#include "dist/dist_env.h"
#include "eval/encoder_score.h"
#include "eval/model_interpolation.h"
#include "eval/pretrained_text.h"
#include "eval/retrieval_score.h"
#include "eval/wilson_interval.h"
#include "eval/windows.h"
#include "model/flops.h"
#include "run/checkpoint.h"
#include "run/data_digest.h"
#include "run/run_directory.h"
#include "util/atomic_file.h"
#include "util/execution_context.h"
#include "util/out_of_memory.h"
#include "util/progress_bar.h"
#include "util/runtime.h"

namespace xtrap {

namespace {

// Model FLOPs of one scoring pass: every window's forward plus the head on the scored rows.
double evalFlops(const ModelConfig& c, TokenSpan stream, int64_t Lvalid, int64_t stride, int64_t scoredRows) {
  auto n = static_cast<int64_t>(stream.size());
  int64_t bos = c.usesBos() ? 1 : 0;  // encoder windows: [<bos>] + words (encoder_score.h)
  auto windows =
      c.causal() ? decoderWindows(n, Lvalid, stride) : encoderWindows(n, Lvalid - bos, std::min(stride, Lvalid - bos));
  double flops = 0;
  for (const auto& w : windows) flops += bodyForwardFlops(c, bos + w.length);
  return flops + double(scoredRows) * headForwardFlopsPerRow(c, adaptiveClusterShares(c, stream));
}

// A run ready to be scored: its run.json, its model placed on the request's device, the split.
struct ScoringRun {
  RunInfo info;
  std::string name;  // the run directory's name (the rows' `run`)
  Corpus corpus;
  Transformer model{nullptr};
  TokenSpan stream;  // the split's tokens (a prefix with maxTokens), viewing `corpus` or `ids`
  // Pretrained models: the tokenizer, the text's ids and the id the first token is predicted from.
  std::shared_ptr<const BpeTokenizer> tokenizer;
  std::shared_ptr<const std::vector<int32_t>> ids;
  int32_t contextToken = -1;
  TextCounts counts;  // of the text `stream` spells
};

// Word-level runs: the words rejoined by single spaces, a newline for each <eos> (data/text_tokens.h).
TextCounts wordLevelCounts(TokenSpan stream, const Vocabulary& vocab) {
  TextCounts c;
  for (int32_t id : stream) c.bytes += id == vocab.eos() ? 1 : int64_t(vocab.word(id).size()) + 1;
  c.words = int64_t(stream.size());
  return c;
}

// A pretrained model's text: --text, else --data's split file, tokenized by its tokenizer.json.
ScoringRun loadPretrainedRun(ScoringRun s, const EvalRequest& req, const ExecutionContext& ctx) {
  PretrainedText text = loadPretrainedText(s.info, req.textFile, req.dataDir, req.split);
  s.tokenizer = text.tokenizer;
  s.ids = text.ids;
  s.stream = *s.ids;
  s.counts = text.counts;
  if (req.maxTokens > 0 && req.maxTokens < static_cast<int64_t>(s.stream.size())) {
    s.stream = s.stream.subspan(0, size_t(req.maxTokens));
    // A detokenized file's counts are of the text as written, which a prefix of its tokens does
    // not delimit: such a row has no per-byte or per-word figures.
    s.counts = text.detokenized ? TextCounts{} : countText(s.tokenizer->decode(s.stream.toVector()));
  }
  s.contextToken = s.info.contextToken;
  s.model = loadTrainedModel(s.info, ctx);
  return s;
}

ScoringRun loadScoringRun(const std::filesystem::path& dir, const EvalRequest& req, const ExecutionContext& ctx) {
  ScoringRun s;
  s.info = readRunInfo(dir);
  s.name = dir.filename().string();
  if (!s.info.pretrained.empty()) return loadPretrainedRun(std::move(s), req, ctx);
  if (!req.textFile.empty())
    throw std::invalid_argument("--text applies to pretrained models; " + dir.string() +
                                " is a word-level run (--data)");
  std::string dataDir = req.dataDir.empty() ? s.info.train.dataDir : req.dataDir;
  s.corpus = loadWikiText(dataDir);
  int64_t vocab = s.corpus.vocab.size() + s.info.model.specialTokens();
  if (vocab != s.info.model.vocabSize)
    throw std::runtime_error(fmt::format("vocabulary mismatch: run {} was trained with {} words, {} gives {}",
                                         dir.string(), s.info.model.vocabSize, dataDir, vocab));
  if (req.dataDir.empty()) {  // another --data is a deliberate choice, not a change
    std::string changed = dataChangedWarning(dir.string(), dataDir, s.info.dataDigest, s.corpus.digest);
    if (!changed.empty()) std::fprintf(stderr, "xtrap: warning: %s\n", changed.c_str());
  }
  s.model = loadTrainedModel(s.info, ctx);
  s.stream = s.corpus.split(req.split);
  if (req.maxTokens > 0 && req.maxTokens < static_cast<int64_t>(s.stream.size()))
    s.stream = s.stream.subspan(0, size_t(req.maxTokens));
  s.counts = wordLevelCounts(s.stream, s.corpus.vocab);
  return s;
}

// What one scoring pass scores: the run at one Lvalid, in one mode, under one interpolation.
struct EvalPass {
  Interp interp = Interp::None;
  InterpolationPlan plan;
  int64_t Lvalid = 0;
  double scale = 1;    // a of the full-length windows
  std::string slopes;  // what applyInterpolation reported for them
  std::string mode = "nonoverlap";
};

struct ScoredPass {
  EvalRow row;
  std::vector<PositionLossRow> byPosition;  // when the request asks for position buckets
};

// What every row of a pass says: the run, the length, the interpolation, where it ran.
EvalRow passRow(const ScoringRun& run, const EvalRequest& req, const ExecutionContext& ctx, const EvalPass& pass,
                double seconds) {
  const ModelConfig& m = run.info.model;
  EvalRow r;
  r.run = run.name;
  r.arch = m.arch;
  r.pos = m.pos;
  r.Ltrain = m.contextLength;
  r.Lvalid = pass.Lvalid;
  r.split = req.textFile.empty() ? req.split : "text";  // --text scores a file, not a split
  r.mode = pass.mode;
  r.interp = interpLabel(pass.interp, req.ntkHeads, req.scalePerLength);
  r.scale = pass.scale;
  r.slopes = pass.slopes;
  r.seconds = seconds;
  r.peakMemoryMiB = peakMemoryMiB(run.model->device());  // this rank's
  r.device = ctx.deviceName();
  r.dtype = ctx.dtypeName();
  r.seed = int64_t(run.info.train.seed);
  return r;
}

// One retrieval cell: req.trials prompts of Lvalid positions (an encoder's <bos> counted) with the
// answer at `depth` percent, split over the ranks. The pass's interpolation is already set for
// Lvalid by the sweep (every prompt of a cell has that length, dynamic interpolation included).
EvalRow scoreRetrievalCell(ScoringRun& run, const EvalRequest& req, const ExecutionContext& ctx, const EvalPass& pass,
                           double depth, DistGroup& group) {
  const ModelConfig& m = run.info.model;
  MlmTokens mlm = m.causal() ? MlmTokens{} : m.mlmTokens(run.corpus.vocab);
  int64_t promptLength = pass.Lvalid - mlm.bosColumns();
  RetrievalPromptBuilder builder(run.tokenizer ? bpePhraseEncoder(*run.tokenizer) : wordPhraseEncoder(run.corpus.vocab),
                                 run.stream);
  RetrievalTask task = parseRetrievalTask(req.task);
  Filler filler = parseFiller(req.filler);
  resetPeakMemory(run.model->device());
  auto t0 = std::chrono::steady_clock::now();
  std::vector<RetrievalPrompt> prompts;
  for (int64_t trial = 0; trial < req.trials; ++trial)
    prompts.push_back(builder.build({task, filler, req.promptSeed, promptLength, depth / 100, trial}));
  RetrievalScoreOptions opt;
  opt.batch = req.batch;
  opt.queryBlock = req.queryBlock;
  opt.shard = {group.rank(), group.world()};
  opt.mlm = mlm;
  std::string doing = fmt::format("scoring {} prompts of {} tokens on {}, {} a forward pass,", req.task, pass.Lvalid,
                                  ctx.deviceName(), req.batch);
  std::string remedy = outOfMemoryRemedy(
      req, ctx.lowPrecision(), run.model->attentionPath(pass.Lvalid, {req.queryBlock}), run.model->biasKind());
  RetrievalTotals totals =
      withOutOfMemoryAdvice(doing, remedy, [&] { return scoreRetrieval(run.model, prompts, opt); });
  totals.sumOverRanks(group);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  EvalRow r = passRow(run, req, ctx, pass, seconds);
  r.task = req.task;
  r.filler = task == RetrievalTask::Passkey ? req.filler : std::string();
  r.depth = depth;
  r.trials = totals.trials;
  r.correct = totals.correct;
  r.accuracy = double(totals.correct) / double(std::max<int64_t>(totals.trials, 1));
  ProportionInterval ci = wilsonInterval(totals.correct, std::max<int64_t>(totals.trials, 1));
  r.accuracyLow = ci.low, r.accuracyHigh = ci.high;
  r.answerLogProb = totals.answerLogProb / double(std::max<int64_t>(totals.answerTokens, 1));
  r.tokensScored = totals.answerTokens;
  r.nll = -r.answerLogProb;
  r.ppl = std::exp(r.nll);
  double promptTokens = double(totals.trials * pass.Lvalid);
  r.tokensPerSecond = promptTokens / std::max(seconds, 1e-9);
  r.flopsPerSecond = (double(totals.trials) * bodyForwardFlops(m, pass.Lvalid) +
                      double(totals.answerTokens) * headForwardFlopsPerRow(m)) /
                     std::max(seconds, 1e-9);
  return r;
}

// One row: scores every window this rank owns (the interpolation of the full-length windows is
// already set; dynamic-ntk sets a shorter last window's own), sums over the ranks.
ScoredPass scorePass(ScoringRun& run, const EvalRequest& req, const ExecutionContext& ctx, const EvalPass& pass,
                     DistGroup& group) {
  const ModelConfig& m = run.info.model;
  int64_t L = m.contextLength;
  int64_t stride = pass.mode == "nonoverlap" ? pass.Lvalid
                                             : std::clamp<int64_t>(req.stride > 0 ? req.stride : L / 2, 1, pass.Lvalid);
  auto prepareLength = [&](int64_t windowLength) {
    applyInterpolation(run.model, pass.interp, pass.plan.scaleFor(windowLength), req.ntkHeads);
  };

  std::optional<ProgressBar> bar;
  auto streamTokens = static_cast<int64_t>(run.stream.size());
  int64_t expected = m.causal() ? streamTokens : int64_t(double(streamTokens) * run.info.train.maskProb);
  if (req.progress && group.isRoot())
    bar.emplace(fmt::format("eval {} Lvalid={} {}", run.name, pass.Lvalid, pass.mode), expected);
  auto progress = [&](int64_t done) {
    if (bar) bar->update(std::min(done, expected));
  };
  WindowShard shard{group.rank(), group.world()};
  resetPeakMemory(run.model->device());
  auto t0 = std::chrono::steady_clock::now();
  WindowScoring scoring;
  scoring.Lvalid = pass.Lvalid;
  scoring.stride = stride;
  scoring.batch = req.batch;
  scoring.queryBlock = req.queryBlock;
  scoring.positionBuckets = req.positionBuckets;
  scoring.shard = shard;
  scoring.prepareLength = prepareLength;
  std::string doing =
      fmt::format("scoring Lvalid {} on {}, {} windows a forward pass,", pass.Lvalid, ctx.deviceName(), req.batch);
  std::string remedy = outOfMemoryRemedy(
      req, ctx.lowPrecision(), run.model->attentionPath(pass.Lvalid, {req.queryBlock}), run.model->biasKind());
  ScoreTotals totals = withOutOfMemoryAdvice(doing, remedy, [&] {
    if (m.causal()) {
      ScoreOptions opt;
      static_cast<WindowScoring&>(opt) = scoring;
      opt.eos = run.tokenizer ? run.contextToken : run.corpus.vocab.eos();
      return scoreDecoder(run.model, run.stream, opt, progress);
    }
    EncoderScoreOptions opt;
    static_cast<WindowScoring&>(opt) = scoring;
    opt.maskProb = run.info.train.maskProb;
    opt.mlm = m.mlmTokens(run.corpus.vocab);
    return scoreEncoder(run.model, run.stream, opt, progress);
  });
  totals.sumOverRanks(group);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (bar) bar->finish();

  ScoredPass out;
  EvalRow& r = out.row;
  r = passRow(run, req, ctx, pass, seconds);
  r.stride = stride;
  r.tokensScored = totals.tokens;
  r.nll = totals.meanNll();
  r.ppl = std::exp(r.nll);
  r.tokensPerSecond = double(totals.tokens) / std::max(seconds, 1e-9);
  r.flopsPerSecond = evalFlops(m, run.stream, pass.Lvalid, stride, totals.tokens) / std::max(seconds, 1e-9);
  // Every token of the stream is scored once (decoders; encoders score the masked ones, whose
  // text is not the whole stream's: no per-byte figures).
  if (m.causal() && totals.tokens == int64_t(run.stream.size()) && run.counts.bytes > 0) {
    double totalNll = totals.nll;
    r.textBytes = run.counts.bytes;
    r.textWords = run.counts.words;
    r.bitsPerByte = totalNll / std::log(2.0) / double(run.counts.bytes);
    r.wordPpl = std::exp(totalNll / double(std::max<int64_t>(run.counts.words, 1)));
  }
  for (size_t b = 0; b < totals.bucketNll.size(); ++b) {
    PositionLossRow p;
    p.run = r.run;
    p.mode = r.mode;
    p.interp = r.interp;
    p.Lvalid = pass.Lvalid;
    p.bucket = int64_t(b);
    p.positionBegin = int64_t(b) * pass.Lvalid / req.positionBuckets;
    p.positionEnd = (int64_t(b) + 1) * pass.Lvalid / req.positionBuckets;
    p.tokens = totals.bucketTokens[b];
    p.meanNll = p.tokens ? totals.bucketNll[b] / double(p.tokens) : NAN;
    out.byPosition.push_back(p);
  }
  return out;
}

}  // namespace

std::string outOfMemoryRemedy(const EvalRequest& req, bool lowPrecision, AttentionPath path, BiasKind bias) {
  if (req.batch > 1) return fmt::format("lower --batch (e.g. --batch {})", req.batch / 2);
  if (path == AttentionPath::FusedLinearBias || (path == AttentionPath::Sdpa && bias == BiasKind::None))
    return fmt::format("at --batch 1 the {} attention path already holds O(Lvalid) memory: evaluate a shorter --Lvalid",
                       attentionPathName(path));
  std::string block = req.queryBlock > 0 ? fmt::format("lower --query-block (now {})", req.queryBlock)
                                         : std::string("set --query-block (e.g. 256)");
  return "at --batch 1, " + block + (lowPrecision ? "" : " or use --dtype bfloat16");
}

std::vector<EvalRow> evaluateRuns(const EvalRequest& req, std::vector<PositionLossRow>* positionRows) {
  configureRuntime(req.threads);
  DistEnv env = distEnvFromEnvironment();
  ExecutionContext ctx = makeExecutionContext(req.device, req.dtype, env.localRank);
  for (const auto& mode : req.modes)
    if (mode != "nonoverlap" && mode != "sliding")
      throw std::invalid_argument("unknown --mode '" + mode + "' (valid: nonoverlap, sliding, both)");
  bool anyNtk = std::any_of(req.interps.begin(), req.interps.end(),
                            [](Interp i) { return i == Interp::Ntk || i == Interp::DynamicNtk; });
  if (req.ntkHeads != NtkHeads::All && !anyNtk)
    throw std::invalid_argument("--ntk-heads applies to --interp ntk and dynamic-ntk");
  DistGroup group(env, ctx.device);  // under torchrun / --nproc the ranks split every pass's windows
  int64_t maxLvalid = *std::max_element(req.lvalids.begin(), req.lvalids.end());
  std::vector<EvalRow> rows;
  for (const auto& dir : req.runs) {
    ScoringRun run = loadScoringRun(dir, req, ctx);
    int64_t L = run.info.model.contextLength;
    for (Interp interp : req.interps) {
      EvalPass pass;
      pass.interp = interp;
      pass.plan = interpolationPlan(interp, maxLvalid, L, req.scale, req.a0);
      checkInterpolationApplies(run.model, interp, req.ntkHeads);  // before any line is printed
      if (usesFixedScale(interp) && !req.scalePerLength)
        std::fprintf(stderr, "%s interp=%s: fixed a = %.6g for the sweep (%s)\n", run.name.c_str(),
                     interpName(interp).c_str(), pass.plan.fixedScale,
                     req.scale > 0 ? "--scale"
                                   : fmt::format("largest Lvalid {} / L_train {}, at least 1", maxLvalid, L).c_str());
      for (int64_t Lvalid : req.lvalids) {
        pass.Lvalid = Lvalid;
        if (req.scalePerLength) pass.plan = interpolationPlan(interp, Lvalid, L, 0, req.a0);
        if (group.isRoot() && !req.retrieval() && Lvalid >= static_cast<int64_t>(run.stream.size()))
          std::fprintf(stderr, "note: Lvalid %lld exceeds the %s split (%zu tokens); scoring one window of all of it\n",
                       static_cast<long long>(Lvalid), req.split.c_str(), run.stream.size());
        // The row's scale and slopes are those of its full-length windows; dynamic-ntk gives a
        // shorter last window its own.
        pass.scale = pass.plan.scaleFor(Lvalid);
        pass.slopes = applyInterpolation(run.model, interp, pass.scale, req.ntkHeads);
        if (req.verbose && !pass.slopes.empty() && group.isRoot())
          std::fprintf(
              stderr, "%s Lvalid=%lld interp=%s a=%.4g%s: %s\n", run.name.c_str(), static_cast<long long>(Lvalid),
              interpName(interp).c_str(), pass.scale,
              isDynamic(interp) ? fmt::format(" (a = max({:g} * len / {}, 1) per window)", req.a0, L).c_str() : "",
              pass.slopes.c_str());
        if (req.retrieval()) {
          pass.mode = "prompt";
          std::optional<ProgressBar> bar;
          if (req.progress && group.isRoot())
            bar.emplace(fmt::format("{} {} Lvalid={} ({} depths x {} trials)", run.name, req.task, Lvalid,
                                    req.depths.size(), req.trials),
                        int64_t(req.depths.size()));
          for (size_t d = 0; d < req.depths.size(); ++d) {
            rows.push_back(scoreRetrievalCell(run, req, ctx, pass, req.depths[d], group));
            if (bar) bar->update(int64_t(d + 1));
          }
          if (bar) bar->finish();
          continue;
        }
        for (const auto& mode : req.modes) {
          pass.mode = mode;
          ScoredPass scored = scorePass(run, req, ctx, pass, group);
          rows.push_back(scored.row);
          if (positionRows)
            positionRows->insert(positionRows->end(), scored.byPosition.begin(), scored.byPosition.end());
        }
      }
    }
  }
  return rows;
}

void writePositionRows(const std::filesystem::path& file, const std::vector<PositionLossRow>& rows) {
  std::string csv = "run,mode,interp,Lvalid,bucket,position_begin,position_end,tokens,mean_nll\n";
  for (const auto& p : rows)
    csv += fmt::format("{},{},{},{},{},{},{},{},{:.6f}\n", p.run, p.mode, p.interp, p.Lvalid, p.bucket, p.positionBegin,
                       p.positionEnd, p.tokens, p.meanNll);
  writeTextAtomically(file, csv);
}

}  // namespace xtrap
