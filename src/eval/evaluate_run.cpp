#include "eval/evaluate_run.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>

#include "data/native_prompt.h"
#include "data/text_documents.h"
#include "data/text_tokens.h"
#include "data/wikitext.h"
#include "dist/dist_env.h"
#include "eval/encoder_score.h"
#include "eval/greedy_generation.h"
#include "eval/kl_divergence.h"
#include "eval/model_interpolation.h"
#include "eval/pretrained_text.h"
#include "eval/retrieval_score.h"
#include "eval/wilson_interval.h"
#include "eval/window_protocol.h"
#include "eval/windows.h"
#include "model/flops.h"
#include "run/checkpoint.h"
#include "run/data_digest.h"
#include "run/pretrained_family.h"
#include "run/run_directory.h"
#include "util/atomic_file.h"
#include "util/execution_context.h"
#include "util/out_of_memory.h"
#include "util/progress_bar.h"
#include "util/runtime.h"

namespace xtrap {

namespace {

// Model FLOPs of one scoring pass: every window's forward (pseudo-log-likelihood: one per word of
// the window) plus the head on the scored rows.
double evalFlops(const ModelConfig& c, const MlmTokens& mlm, TokenSpan stream, const WindowPlan& plan, bool pll,
                 int64_t scoredRows) {
  auto n = static_cast<int64_t>(stream.size());
  int64_t frame = mlm.frameColumns();  // encoder windows: [<bos>] + words [+ <eos>] (encoder_score.h)
  int64_t words = plan.Lvalid - frame;
  std::vector<int64_t> lengths;  // of the windows the pass feeds the model
  if (c.causal())
    for (const auto& w : protocolWindows(plan, n)) lengths.push_back(w.length);
  else
    for (const auto& w : encoderWindows(n, words, pll ? words : std::min(plan.stride, words)))
      lengths.push_back(w.length);
  double flops = 0;
  for (int64_t length : lengths) flops += double(pll ? length : 1) * bodyForwardFlops(c, frame + length);
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
  std::shared_ptr<const Tokenizer> tokenizer;
  std::shared_ptr<const std::vector<int32_t>> ids;
  int32_t contextToken = -1;
  MlmTokens mlm;             // encoders: what masking and the windows' frame use
  TextCounts counts;         // of the text `stream` spells
  bool detokenized = false;  // a pretrained model's text read detokenized (pretrained_text.h)
  // Of `stream`, when samples are logged or lm-eval's protocol scores them apart (perplexity).
  std::vector<TextDocument> documents;
  // EvalRequest::klBase: the model compared with, and the interpolation it is scored under.
  Transformer klBase{nullptr};
  Interp klBaseInterp = Interp::None;
  std::string klBaseName;  // the rows' kl_base: the interpolation's name or the directory's
};

// The text one token spells: a word-level run's word (<eos> as a newline), a tokenizer's piece;
// "<id>" for an id with no text (an encoder's special tokens after the words; a model's rows past
// its tokenizer's ids, as BLOOM pads its embedding).
std::string tokenText(const ScoringRun& run, int32_t id) {
  if (run.tokenizer) {
    try {
      return run.tokenizer->decode({id});
    } catch (const std::out_of_range&) {
      return fmt::format("<{}>", id);
    }
  }
  const Vocabulary& v = run.corpus.vocab;
  if (id == v.eos()) return "\n";
  return id >= 0 && id < v.size() ? v.word(id) : fmt::format("<{}>", id);
}

// Token ids as text: a tokenizer's decode (ids no token has as "<id>" between the runs decoded
// around them), else the words joined by spaces (<eos> a newline).
std::string decodeTokens(const ScoringRun& run, const std::vector<int32_t>& ids) {
  if (run.tokenizer) {
    try {
      return run.tokenizer->decode(ids);
    } catch (const std::out_of_range&) {
    }
    std::string text;
    std::vector<int32_t> known;
    for (int32_t id : ids) {
      std::string piece = tokenText(run, id);
      if (piece != fmt::format("<{}>", id)) {
        known.push_back(id);
        continue;
      }
      text += run.tokenizer->decode(known) + piece;
      known.clear();
    }
    return text + run.tokenizer->decode(known);
  }
  std::string text;
  for (int32_t id : ids) {
    std::string piece = tokenText(run, id);
    text += (text.empty() || text.back() == '\n' || piece == "\n" ? "" : " ") + piece;
  }
  return text;
}

// The documents of the scored stream (data/text_documents.h), from each token's text.
std::vector<TextDocument> streamDocuments(const ScoringRun& run) {
  std::vector<std::string> pieces;
  pieces.reserve(run.stream.size());
  bool lineStart = true;
  for (int32_t id : run.stream) {
    std::string piece = tokenText(run, id);
    if (!run.tokenizer && !lineStart && piece != "\n") piece = " " + piece;
    lineStart = piece == "\n";
    pieces.push_back(std::move(piece));
  }
  return headingDocuments(pieces);
}

// Whether the run's documents are found: for --log-samples and for lm-eval's protocol.
bool needsDocuments(const EvalRequest& req) {
  return (req.logSamples || req.protocol == "lm-eval") && !req.retrieval();
}

// What the context token c (window_protocol.h) is called in a row's protocol.
std::string contextTokenName(const ScoringRun& run) {
  if (!run.tokenizer) return "<eos>";
  std::string text = tokenText(run, run.contextToken);
  return text.empty() || text.find_first_of(" \n;") != std::string::npos ? fmt::format("<id {}>", run.contextToken)
                                                                         : text;
}

// lm-eval's word and byte counts, each document's page as the harness counts it
// (data/text_tokens.h): a word-level run's page is its lines as WikiText's .tokens files write them
// (" w1 w2 \n"), a tokenizer's the document's tokens decoded. A text read detokenized has no page
// as written here: no counts.
TextCounts harnessCounts(const ScoringRun& run) {
  TextCounts total;
  if (run.detokenized) return total;
  for (size_t d = 0; d < run.documents.size(); ++d) {
    auto from = size_t(run.documents[d].firstToken);
    size_t to = d + 1 < run.documents.size() ? size_t(run.documents[d + 1].firstToken) : run.stream.size();
    std::string page;
    if (run.tokenizer) {
      page = decodeTokens(run, run.stream.subspan(from, to - from).toVector());
    } else {
      for (size_t i = from; i < to; ++i)
        page +=
            run.stream[i] == run.corpus.vocab.eos() ? std::string(" \n") : " " + run.corpus.vocab.word(run.stream[i]);
    }
    TextCounts c = harnessPageCounts(page);
    total.bytes += c.bytes;
    total.words += c.words;
  }
  return total;
}

// Word-level runs: the words rejoined by single spaces, a newline for each <eos> (data/text_tokens.h).
TextCounts wordLevelCounts(TokenSpan stream, const Vocabulary& vocab) {
  TextCounts c;
  for (int32_t id : stream) c.bytes += id == vocab.eos() ? 1 : int64_t(vocab.word(id).size()) + 1;
  c.words = int64_t(stream.size());
  return c;
}

// A pretrained model's text: --text, else --data's split file, tokenized by its tokenizer.json. A run
// trained from one reads its own training data by default, through the tokenizer.json it copied.
ScoringRun loadTokenizerRun(ScoringRun s, const EvalRequest& req, const ExecutionContext& ctx) {
  const bool ownData = !s.info.tokenizerFamily.empty() && req.dataDir.empty() && req.textFile.empty();
  PretrainedText text = loadPretrainedText(s.info, req.textFile, ownData ? s.info.train.dataDir : req.dataDir,
                                           req.split, req.readsText());
  s.tokenizer = text.tokenizer;
  s.ids = text.ids;
  s.stream = *s.ids;
  s.counts = text.counts;
  s.detokenized = text.detokenized;
  if (req.maxTokens > 0 && req.maxTokens < static_cast<int64_t>(s.stream.size())) {
    s.stream = s.stream.subspan(0, size_t(req.maxTokens));
    // A detokenized file's counts are of the text as written, which a prefix of its tokens does
    // not delimit: such a row has no per-byte or per-word figures.
    s.counts = text.detokenized ? TextCounts{} : countText(s.tokenizer->decode(s.stream.toVector()));
  }
  s.contextToken = s.info.contextToken;
  if (!s.info.model.causal()) {
    if (s.info.model.head == "none")
      throw std::invalid_argument(s.info.dir.string() +
                                  " was saved without its masked-LM head: eval needs one (probe reads its attention)");
    s.mlm = pretrainedMlmTokens(*s.tokenizer, (s.info.dir / "tokenizer.json").string());
  }
  // Several families share a model_type (bert): say which one the directory was read as.
  if (const PretrainedFamily* f = findPretrainedFamily(s.info.pretrained); f && !f->name.empty())
    std::fprintf(stderr, "%s: model_type %s, read as %s\n", s.name.c_str(), f->modelTypes.front().c_str(),
                 f->name.c_str());
  s.model = loadTrainedModel(s.info, ctx);
  if (needsDocuments(req)) s.documents = streamDocuments(s);
  return s;
}

ScoringRun loadScoringRun(const std::filesystem::path& dir, const EvalRequest& req, const ExecutionContext& ctx) {
  ScoringRun s;
  s.info = readRunInfo(dir);
  setTrainLength(s.info, req.trainLength);
  s.name = dir.filename().string();
  if (s.info.readsTokenizer()) return loadTokenizerRun(std::move(s), req, ctx);
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
  if (!s.info.model.causal()) s.mlm = s.info.model.mlmTokens(s.corpus.vocab);
  s.stream = s.corpus.split(req.split);
  if (req.maxTokens > 0 && req.maxTokens < static_cast<int64_t>(s.stream.size()))
    s.stream = s.stream.subspan(0, size_t(req.maxTokens));
  s.counts = wordLevelCounts(s.stream, s.corpus.vocab);
  if (needsDocuments(req)) s.documents = streamDocuments(s);
  return s;
}

// EvalRequest::klBase: an interpolation's name loads the run a second time (to be scored under that
// interpolation); a directory loads that run or pretrained model, which must read the same tokens.
void loadKlBase(ScoringRun& run, const EvalRequest& req, const ExecutionContext& ctx) {
  const auto& names = interpNames();
  if (std::find(names.begin(), names.end(), req.klBase) != names.end()) {
    run.klBaseInterp = parseInterp(req.klBase);
    run.klBase = loadTrainedModel(run.info, ctx);  // no context extension: the model as it is
    checkInterpolationApplies(run.klBase, run.klBaseInterp, req.ntkHeads);
    run.klBaseName = req.klBase;
    return;
  }
  RunInfo base = readRunInfo(req.klBase);
  std::string why;
  if (!base.model.causal())
    why = "it is an encoder";
  else if (base.model.vocabSize != run.info.model.vocabSize)
    why = fmt::format("it has {} tokens, {} has {}", base.model.vocabSize, run.name, run.info.model.vocabSize);
  else if (run.tokenizer &&
           (!base.readsTokenizer() ||
            loadPretrainedText(base, "", "", req.split, false).tokenizer->digest() != run.tokenizer->digest()))
    why = "its tokenizer.json differs";
  else if (!run.tokenizer && (base.readsTokenizer() || base.dataDigest != run.info.dataDigest))
    why = "it was trained on other data (its data digest differs)";
  if (!why.empty())
    throw std::invalid_argument("--kl-base " + req.klBase + " must read the same tokens as " + run.name + ": " + why);
  run.klBase = loadTrainedModel(base, ctx);
  run.klBaseName = base.dir.filename().string();
}

// A row's comparison with its base (eval --kl-base) from the per-token KL values, the tokens with
// the same top token, and the summed NLL of the row's model and of the base over those `tokens`.
void setComparison(EvalRow& r, const std::string& base, const std::vector<double>& kl, int64_t sameTop, double nll,
                   double baseNll) {
  auto tokens = double(kl.size());
  KlSummary s = summarizeKl(kl);
  r.klBase = base;
  r.klMean = s.mean, r.klP99 = s.p99, r.klP999 = s.p999, r.klMax = s.max;
  r.sameTop = double(sameTop) / tokens;
  r.pplRatio = std::exp((nll - baseNll) / tokens);
}

// What one scoring pass scores: the run at one Lvalid, in one mode, under one interpolation.
struct EvalPass {
  Interp interp = Interp::None;
  ContextExtension extension;  // set on the model for the pass
  InterpolationPlan plan;
  int64_t Lvalid = 0;
  double scale = 1;    // a of the full-length windows
  std::string slopes;  // what applyInterpolation reported for them
  std::string mode = "nonoverlap";
  InterpolationPlan klBasePlan;  // the compared base's (ScoringRun::klBase)
};

struct ScoredPass {
  EvalRow row;
  std::vector<PositionLossRow> byPosition;  // when the request asks for position buckets
  std::vector<std::string> samples;         // --log-samples: a JSON line per document
};

// The keys every sample line of a row starts with.
nlohmann::json sampleKeys(const EvalRow& r, const char* kind) {
  return {{"kind", kind},
          {"run", r.run},
          {"task", r.task},
          {"mode", r.mode},
          {"interp", interpolationDisplay(r)},
          {"extend", r.extend},
          {"scale", r.scale},
          {"Lvalid", r.Lvalid},
          {"device", r.device},
          {"dtype", r.dtype}};
}

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
  r.extend = pass.extension.label();
  r.scale = pass.scale;
  r.slopes = pass.slopes;
  r.seconds = seconds;
  r.peakMemoryMiB = peakMemoryMiB(run.model->device());  // this rank's
  r.device = ctx.deviceName();
  r.dtype = ctx.dtypeName();
  r.seed = int64_t(run.info.train.seed);
  return r;
}

// A retrieval row: the pass's row with the cell's depth (percent), its filler where the prompts
// have one, and its totals summed over the ranks.
EvalRow retrievalRow(EvalRow r, const EvalRequest& req, double depth, bool filled, const RetrievalTotals& totals) {
  r.task = req.task;
  r.filler = filled ? req.filler : std::string();
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
  return r;
}

nlohmann::json retrievalSampleKeys(const EvalRow& r, const EvalRequest& req) {
  nlohmann::json keys = sampleKeys(r, "retrieval");
  keys["filler"] = r.filler;
  keys["depth"] = r.depth;
  keys["prompt_seed"] = req.promptSeed;
  return keys;
}

// One retrieval cell: req.trials prompts of Lvalid positions (an encoder's <bos> counted) with the
// answer at `depth` percent, split over the ranks. The pass's interpolation is already set for
// Lvalid by the sweep (every prompt of a cell has that length, dynamic interpolation included).
EvalRow scoreRetrievalCell(ScoringRun& run, const EvalRequest& req, const ExecutionContext& ctx, const EvalPass& pass,
                           double depth, DistGroup& group, std::vector<std::string>* samples) {
  const ModelConfig& m = run.info.model;
  const MlmTokens& mlm = run.mlm;
  int64_t promptLength = pass.Lvalid - mlm.bosColumns();
  RetrievalPromptBuilder builder(
      run.tokenizer ? tokenizerPhraseEncoder(*run.tokenizer) : wordPhraseEncoder(run.corpus.vocab), run.stream);
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
  opt.klBase = run.klBase;
  std::string doing = fmt::format("scoring {} prompts of {} tokens on {}, {} a forward pass,", req.task, pass.Lvalid,
                                  ctx.deviceName(), req.batch);
  std::string remedy = outOfMemoryRemedy(
      req, ctx.lowPrecision(), run.model->attentionPath(pass.Lvalid, {req.queryBlock}), run.model->biasKind());
  std::vector<RetrievalTrial> trials;
  RetrievalTotals totals = withOutOfMemoryAdvice(
      doing, remedy, [&] { return scoreRetrieval(run.model, prompts, opt, samples ? &trials : nullptr); });
  totals.sumOverRanks(group);
  if (samples) gatherTrials(group, trials, prompts.front().answerLength());
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  EvalRow r = retrievalRow(passRow(run, req, ctx, pass, seconds), req, depth, usesFiller(task), totals);
  if (!totals.kl.empty())
    setComparison(r, run.klBaseName, totals.kl, totals.sameTop, totals.comparedNll, totals.baseNll);
  double promptTokens = double(totals.trials * pass.Lvalid);
  r.tokensPerSecond = promptTokens / std::max(seconds, 1e-9);
  r.flopsPerSecond = (double(totals.trials) * bodyForwardFlops(m, pass.Lvalid) +
                      double(totals.answerTokens) * headForwardFlopsPerRow(m)) /
                     std::max(seconds, 1e-9);
  int64_t logged = req.logTrials > 0 ? std::min(req.logTrials, req.trials) : req.trials;
  for (int64_t k = 0; samples && group.isRoot() && k < logged; ++k) {
    const RetrievalPrompt& p = prompts[size_t(k)];
    const RetrievalTrial& t = trials[size_t(k)];
    nlohmann::json j = retrievalSampleKeys(r, req);
    j["trial"] = k;
    std::vector<int32_t> context(p.tokens.begin(), p.tokens.begin() + p.answerBegin);
    std::vector<int32_t> gold(p.tokens.begin() + p.answerBegin, p.tokens.end()), predicted;
    for (int64_t id : t.predicted) predicted.push_back(int32_t(id));
    j["prompt"] = decodeTokens(run, context);
    j["prompt_ids"] = context;
    j["prompt_tokens"] = p.tokens.size();
    j["needle_position"] = p.needleBegin;
    j["answer_position"] = p.answerBegin;
    j["gold"] = decodeTokens(run, gold);
    j["gold_tokens"] = gold;
    j["predicted"] = decodeTokens(run, predicted);
    j["predicted_tokens"] = predicted;
    std::vector<bool> right;
    for (size_t i = 0; i < gold.size(); ++i) right.push_back(predicted[i] == gold[i]);
    j["token_correct"] = right;
    j["token_logprob"] = t.answerLogProb;
    // Answer items (a value's digits, a variable's name): right when all their tokens are.
    int64_t itemsRight = 0;
    for (int64_t item = 0; item < p.answerItems(); ++item)
      itemsRight += std::all_of(right.begin() + item * p.answerItemTokens,
                                right.begin() + (item + 1) * p.answerItemTokens, [](bool b) { return b; });
    j["answer_items"] = p.answerItems();
    j["items_correct"] = itemsRight;
    j["correct"] = std::all_of(right.begin(), right.end(), [](bool b) { return b; });
    samples->push_back(j.dump());
  }
  return r;
}

// One retrieval cell answered by greedy generation (EvalRequest::generates): each prompt's context
// (the tokens before the answer; a native prompt whole) is read into a KV cache and the model
// generates up to maxNewTokens tokens, one prompt at a time, the ranks taking every world-th.
// Words: right when every answer item (a value's digits, a name) occurs in the generated text
// (RULER's string_match_all); native: when the first (Landmark) or last (LongEval) integer of
// the text is the number asked. The row's answer_logprob is the mean log-probability of the
// generated tokens.
EvalRow generateRetrievalCell(ScoringRun& run, const EvalRequest& req, const ExecutionContext& ctx,
                              const EvalPass& pass, double depth, DistGroup& group, std::vector<std::string>* samples) {
  const ModelConfig& m = run.info.model;
  bool native = req.format == "native";
  RetrievalTask task = parseRetrievalTask(req.task);
  Filler filler = parseFiller(req.filler);
  std::optional<RetrievalPromptBuilder> builder;
  if (!native)
    builder.emplace(run.tokenizer ? tokenizerPhraseEncoder(*run.tokenizer) : wordPhraseEncoder(run.corpus.vocab),
                    run.stream);
  const std::vector<int32_t>& stop = run.info.stopTokens;  // pretrained models' eos_token_id
  resetPeakMemory(run.model->device());
  auto t0 = std::chrono::steady_clock::now();
  RetrievalTotals totals;
  int64_t logged = req.logTrials > 0 ? std::min(req.logTrials, req.trials) : req.trials;
  int64_t generatedPositions = 0;  // context and generated tokens through the model, for the rate
  size_t firstLine = samples ? samples->size() : 0;
  for (int64_t k = 0; k < req.trials; ++k) {
    if (!WindowShard{group.rank(), group.world()}.owns(size_t(k))) continue;
    PromptRequest request{task, filler, req.promptSeed, pass.Lvalid, depth / 100, k};
    std::vector<int32_t> context, gold;
    std::vector<std::string> items;  // words: the answer items as text
    NativePrompt nativePrompt;
    int64_t needle = 0, maxNew = req.maxNewTokens;
    if (native) {
      nativePrompt = buildNativePrompt(*run.tokenizer, request);
      context = nativePrompt.tokens;
      needle = nativePrompt.needleBegin;
      if (maxNew == 0) maxNew = nativePrompt.lastInteger ? 15 : 10;
    } else {
      RetrievalPrompt p = builder->build(request);
      context.assign(p.tokens.begin(), p.tokens.begin() + p.answerBegin);
      gold.assign(p.tokens.begin() + p.answerBegin, p.tokens.end());
      for (int64_t item = 0; item < p.answerItems(); ++item) {
        auto from = p.tokens.begin() + p.answerBegin + item * p.answerItemTokens;
        std::string text = decodeTokens(run, {from, from + p.answerItemTokens});
        text.erase(0, text.find_first_not_of(' '));
        items.push_back(text);
      }
      needle = p.needleBegin;
      if (maxNew == 0) maxNew = p.answerLength();
    }
    Generation g = generateGreedy(run.model, context, maxNew, req.queryBlock, stop);
    std::string text = decodeTokens(run, g.tokens);
    std::string parsed = native ? integerIn(text, nativePrompt.lastInteger) : std::string();
    int64_t found = native ? 0 : itemsFound(text, items);
    bool right = native ? parsed == nativePrompt.answer : found == int64_t(items.size());
    totals.trials += 1;
    totals.correct += right ? 1 : 0;
    totals.answerTokens += int64_t(g.tokens.size());
    for (double lp : g.logProbs) totals.answerLogProb += lp;
    generatedPositions += int64_t(context.size() + g.tokens.size());
    if (!samples || k >= logged) continue;
    nlohmann::json j;
    j["trial"] = k;
    j["prompt"] = decodeTokens(run, context);
    j["prompt_ids"] = context;
    j["prompt_tokens"] = context.size() + gold.size();  // native: the context alone, at most Lvalid
    j["needle_position"] = needle;
    j["gold"] = native ? nativePrompt.answer : decodeTokens(run, gold);
    if (!native) j["gold_tokens"] = gold;
    j["predicted"] = text;
    j["predicted_tokens"] = g.tokens;
    j["token_logprob"] = g.logProbs;
    if (native) j["parsed"] = parsed;
    j["answer_items"] = native ? 1 : int64_t(items.size());
    j["items_correct"] = native ? int64_t(right) : found;
    j["correct"] = right;
    samples->push_back(j.dump());  // the row's keys are put in front below
  }
  totals.sumOverRanks(group);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EvalPass generated = pass;
  generated.mode = native ? "native" : "generate";
  EvalRow r = retrievalRow(passRow(run, req, ctx, generated, seconds), req, depth, usesFiller(task) && !native, totals);
  r.tokensPerSecond = double(generatedPositions) / std::max(seconds, 1e-9);  // this rank's
  r.flopsPerSecond = double(totals.trials) * bodyForwardFlops(m, pass.Lvalid) / std::max(seconds, 1e-9);
  if (samples) {
    // Each trial's line: the row's keys first, then what the trial computed.
    nlohmann::json keys = retrievalSampleKeys(r, req);
    for (size_t i = firstLine; i < samples->size(); ++i) {
      nlohmann::json line = keys;
      line.update(nlohmann::json::parse((*samples)[i]));
      (*samples)[i] = line.dump();
    }
  }
  return r;
}

// One row: scores every window this rank owns (the interpolation of the full-length windows is
// already set; dynamic-ntk sets a shorter last window's own), sums over the ranks.
ScoredPass scorePass(ScoringRun& run, const EvalRequest& req, const ExecutionContext& ctx, const EvalPass& pass,
                     DistGroup& group) {
  const ModelConfig& m = run.info.model;
  int64_t L = m.contextLength;
  const bool pll = pass.mode == "pll";
  WindowPlan plan;
  plan.protocol = parseWindowProtocol(req.protocol);
  plan.Lvalid = pass.Lvalid;
  plan.bos = req.windowBos;
  // Strided with bos: a window holds Lvalid - 1 tokens of the text after the context token.
  int64_t windowTokens = std::max<int64_t>(1, pass.Lvalid - (plan.bos ? 1 : 0));
  bool strides = pass.mode == "sliding" || plan.protocol == WindowProtocol::Strided;
  plan.stride = strides ? std::clamp<int64_t>(req.stride > 0 ? req.stride : L / 2, 1, windowTokens) : pass.Lvalid;
  for (const TextDocument& d : run.documents) plan.documentStarts.push_back(d.firstToken);
  auto prepareLength = [&](int64_t windowLength) {
    applyInterpolation(run.model, pass.interp, pass.plan.scaleFor(windowLength), req.ntkHeads);
    if (run.klBase)
      applyInterpolation(run.klBase, run.klBaseInterp, pass.klBasePlan.scaleFor(windowLength), req.ntkHeads);
  };

  std::optional<ProgressBar> bar;
  auto streamTokens = static_cast<int64_t>(run.stream.size());
  int64_t expected = m.causal() || pll ? streamTokens : int64_t(double(streamTokens) * run.info.train.maskProb);
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
  scoring.stride = plan.stride;
  scoring.batch = req.batch;
  scoring.queryBlock = req.queryBlock;
  scoring.positionBuckets = req.positionBuckets;
  scoring.shard = shard;
  scoring.prepareLength = prepareLength;
  scoring.documentStarts = plan.documentStarts;
  std::string doing =
      fmt::format("scoring Lvalid {} on {}, {} windows a forward pass,", pass.Lvalid, ctx.deviceName(), req.batch);
  std::string remedy = outOfMemoryRemedy(
      req, ctx.lowPrecision(), run.model->attentionPath(pass.Lvalid, {req.queryBlock}), run.model->biasKind());
  ScoreTotals totals = withOutOfMemoryAdvice(doing, remedy, [&] {
    if (m.causal()) {
      ScoreOptions opt;
      static_cast<WindowScoring&>(opt) = scoring;
      opt.eos = run.tokenizer ? run.contextToken : run.corpus.vocab.eos();
      opt.protocol = plan.protocol;
      opt.bos = plan.bos;
      opt.klBase = run.klBase;
      return scoreDecoder(run.model, run.stream, opt, progress);
    }
    EncoderScoreOptions opt;
    static_cast<WindowScoring&>(opt) = scoring;
    opt.maskProb = run.info.train.maskProb;
    opt.mlm = run.mlm;
    return pll ? scoreEncoderPll(run.model, run.stream, opt, progress)
               : scoreEncoder(run.model, run.stream, opt, progress);
  });
  totals.sumOverRanks(group);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (bar) bar->finish();

  ScoredPass out;
  EvalRow& r = out.row;
  r = passRow(run, req, ctx, pass, seconds);
  r.stride = plan.stride;
  r.tokensScored = totals.tokens;
  r.nll = totals.meanNll();
  r.ppl = std::exp(r.nll);
  r.tokensPerSecond = double(totals.tokens) / std::max(seconds, 1e-9);
  r.flopsPerSecond = evalFlops(m, run.mlm, run.stream, plan, pll, totals.tokens) / std::max(seconds, 1e-9);
  r.protocol = m.causal() ? protocolDescription(plan, contextTokenName(run))
                          : fmt::format("xtrap encoder: windows of {} every {}", pass.Lvalid, plan.stride);
  // Every token of the stream is scored once (decoders, and encoders' pseudo-log-likelihood;
  // masked-LM rows score the masked tokens, whose text is not the whole stream's: no per-byte
  // figures). lm-eval divides by its own counts of each document's page.
  TextCounts counts = plan.protocol == WindowProtocol::LmEval ? harnessCounts(run) : run.counts;
  if ((m.causal() || pll) && totals.tokens == int64_t(run.stream.size()) && counts.bytes > 0) {
    double totalNll = totals.nll;
    r.textBytes = counts.bytes;
    r.textWords = counts.words;
    r.bitsPerByte = totalNll / std::log(2.0) / double(counts.bytes);
    r.wordPpl = std::exp(totalNll / double(std::max<int64_t>(counts.words, 1)));
  }
  if (totals.compared())
    setComparison(r, run.klBaseName, totals.kl, totals.sameTop, totals.comparedNll, totals.baseNll);
  for (size_t b = 0; b < totals.bucketNll.size(); ++b) {
    PositionLossRow p;
    p.run = r.run;
    p.mode = r.mode;
    p.interp = r.interp;
    p.extend = r.extend;
    p.protocol = req.protocol;
    p.Lvalid = pass.Lvalid;
    p.bucket = int64_t(b);
    p.positionBegin = int64_t(b) * pass.Lvalid / req.positionBuckets;
    p.positionEnd = (int64_t(b) + 1) * pass.Lvalid / req.positionBuckets;
    p.tokens = totals.bucketTokens[b];
    p.meanNll = p.tokens ? totals.bucketNll[b] / double(p.tokens) : NAN;
    p.compared = totals.compared();
    p.meanKl = p.tokens ? totals.bucketKl[b] / double(p.tokens) : NAN;
    p.sameTop = p.tokens ? double(totals.bucketSameTop[b]) / double(p.tokens) : NAN;
    out.byPosition.push_back(p);
  }
  for (size_t d = 0; d < totals.documentNll.size() && group.isRoot(); ++d) {
    nlohmann::json j = sampleKeys(r, "document");
    j["stride"] = r.stride;
    j["protocol"] = r.protocol;
    j["document"] = d;
    j["title"] = run.documents[d].title;
    j["first_token"] = run.documents[d].firstToken;
    j["tokens"] = totals.documentTokens[d];
    j["nll"] = totals.documentNll[d];
    double mean = totals.documentTokens[d] ? totals.documentNll[d] / double(totals.documentTokens[d]) : 0.0;
    j["mean_nll"] = mean;
    j["ppl"] = std::exp(mean);
    if (totals.compared() && totals.documentTokens[d] > 0) {
      j["kl_base"] = r.klBase;
      j["kl_mean"] = totals.documentKl[d] / double(totals.documentTokens[d]);
      j["same_top"] = double(totals.documentSameTop[d]) / double(totals.documentTokens[d]);
    }
    out.samples.push_back(j.dump());
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

std::vector<EvalRow> evaluateRuns(const EvalRequest& req, std::vector<PositionLossRow>* positionRows,
                                  std::vector<std::string>* samples) {
  if (req.logSamples != (samples != nullptr)) throw std::logic_error("evaluateRuns: logSamples without its list");
  if (req.logSamples && req.retrieval() && req.generates() && distEnvFromEnvironment().world > 1)
    throw std::invalid_argument("--log-samples of generated answers is written by one process: run without --nproc");
  configureRuntime(req.threads);
  DistEnv env = distEnvFromEnvironment();
  ExecutionContext ctx = makeExecutionContext(req.device, req.dtype, env.localRank);
  for (const auto& mode : req.modes)
    if (mode != "nonoverlap" && mode != "sliding" && mode != "pll")
      throw std::invalid_argument("unknown --mode '" + mode + "' (valid: nonoverlap, sliding, both, pll)");
  WindowProtocol protocol = parseWindowProtocol(req.protocol);
  if (req.windowBos && protocol != WindowProtocol::Strided)
    throw std::invalid_argument("--window-bos applies to --protocol strided");
  // The other protocols give one row a length, named by the protocol.
  std::vector<std::string> modes = req.modes;
  if (protocol != WindowProtocol::Xtrap) modes = {req.protocol + (req.windowBos ? "+bos" : "")};
  if (!req.klBase.empty() && req.retrieval() && req.generates())
    throw std::invalid_argument("--kl-base compares teacher-forced predictions (--score teacher)");
  if (!req.klBase.empty() && env.world > 1)
    throw std::invalid_argument("--kl-base keeps every token's KL in one process: run without --nproc");
  bool anyNtk = std::any_of(req.interps.begin(), req.interps.end(),
                            [](Interp i) { return i == Interp::Ntk || i == Interp::DynamicNtk; });
  if (req.ntkHeads != NtkHeads::All && !anyNtk)
    throw std::invalid_argument("--ntk-heads applies to --interp ntk and dynamic-ntk");
  checkExtensionSettingsUsed(req.extensions, req.extensionSettings);
  DistGroup group(env, ctx.device);  // under torchrun / --nproc the ranks split every pass's windows
  int64_t maxLvalid = *std::max_element(req.lvalids.begin(), req.lvalids.end());
  std::vector<EvalRow> rows;
  for (const auto& dir : req.runs) {
    ScoringRun run = loadScoringRun(dir, req, ctx);
    int64_t L = run.info.model.contextLength;
    if (req.retrieval() && req.format == "native" && !run.tokenizer)
      throw std::invalid_argument(run.name +
                                  " is a word-level run: --format native is for pretrained models (a tokenizer.json)");
    if (req.retrieval() && req.generates() && !run.info.model.causal())
      throw std::invalid_argument("--score generate applies to decoders; " + run.name + " is an encoder");
    if (req.retrieval() && !run.info.model.causal() && run.tokenizer)
      throw std::invalid_argument("retrieval tasks are for decoders and xtrap's own encoders; " + run.name +
                                  " is a pretrained encoder");
    bool pllMode = std::find(req.modes.begin(), req.modes.end(), "pll") != req.modes.end();
    if (!req.retrieval() && pllMode && run.info.model.causal())
      throw std::invalid_argument("--mode pll (pseudo-log-likelihood) is for encoders; " + run.name + " is a decoder");
    if (!run.info.model.causal() && (protocol != WindowProtocol::Xtrap || !req.klBase.empty()))
      throw std::invalid_argument(std::string(protocol != WindowProtocol::Xtrap ? "--protocol" : "--kl-base") +
                                  " applies to decoders; " + run.name + " is an encoder");
    if (!req.klBase.empty()) loadKlBase(run, req, ctx);
    if (protocol == WindowProtocol::LlamaCpp && !req.retrieval())  // too short a text fails before any pass
      for (int64_t Lvalid : req.lvalids) protocolWindows({protocol, Lvalid}, int64_t(run.stream.size()));
    // Every (interpolation, extension) is checked before any line is printed.
    std::vector<ContextExtension> extensions;
    for (const auto& name : req.extensions) {
      extensions.push_back(resolveContextExtension(name, req.extensionSettings, L));
      const ContextExtension& e = extensions.back();
      run.model->setContextExtension(e);  // throws where it has no meaning for this model
      for (Interp interp : req.interps) checkExtensionComposes(interp, e);
      if (e.active() && req.retrieval() && req.generates())
        throw std::invalid_argument("--extend " + e.label() + ": scored teacher-forced only (--score teacher)");
    }
    for (Interp interp : req.interps)
      for (const ContextExtension& extension : extensions) {
        EvalPass pass;
        pass.interp = interp;
        pass.extension = extension;
        run.model->setContextExtension(extension);
        pass.plan = interpolationPlan(interp, maxLvalid, L, req.scale, req.a0);
        pass.klBasePlan = interpolationPlan(run.klBaseInterp, maxLvalid, L, req.scale, req.a0);
        checkInterpolationApplies(run.model, interp, req.ntkHeads);  // before any line is printed
        if (usesFixedScale(interp) && !req.scalePerLength)
          std::fprintf(stderr, "%s interp=%s: fixed a = %.6g for the sweep (%s)\n", run.name.c_str(),
                       interpName(interp).c_str(), pass.plan.fixedScale,
                       req.scale > 0 ? "--scale"
                                     : fmt::format("largest Lvalid {} / L_train {}, at least 1", maxLvalid, L).c_str());
        for (int64_t Lvalid : req.lvalids) {
          pass.Lvalid = Lvalid;
          if (req.scalePerLength) {
            pass.plan = interpolationPlan(interp, Lvalid, L, 0, req.a0);
            pass.klBasePlan = interpolationPlan(run.klBaseInterp, Lvalid, L, 0, req.a0);
          }
          if (group.isRoot() && !req.retrieval() && Lvalid >= static_cast<int64_t>(run.stream.size()))
            std::fprintf(stderr,
                         "note: Lvalid %lld exceeds the %s split (%zu tokens); scoring one window of all of it\n",
                         static_cast<long long>(Lvalid), req.split.c_str(), run.stream.size());
          // The row's scale and slopes are those of its full-length windows; dynamic-ntk gives a
          // shorter last window its own.
          pass.scale = pass.plan.scaleFor(Lvalid);
          pass.slopes = applyInterpolation(run.model, interp, pass.scale, req.ntkHeads);
          if (run.klBase)
            applyInterpolation(run.klBase, run.klBaseInterp, pass.klBasePlan.scaleFor(Lvalid), req.ntkHeads);
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
              rows.push_back(req.generates() ? generateRetrievalCell(run, req, ctx, pass, req.depths[d], group, samples)
                                             : scoreRetrievalCell(run, req, ctx, pass, req.depths[d], group, samples));
              if (bar) bar->update(int64_t(d + 1));
            }
            if (bar) bar->finish();
            continue;
          }
          for (const auto& mode : modes) {
            pass.mode = mode;
            ScoredPass scored = scorePass(run, req, ctx, pass, group);
            rows.push_back(scored.row);
            if (positionRows)
              positionRows->insert(positionRows->end(), scored.byPosition.begin(), scored.byPosition.end());
            if (samples) samples->insert(samples->end(), scored.samples.begin(), scored.samples.end());
          }
        }
      }
  }
  return rows;
}

void writePositionRows(const std::filesystem::path& file, const std::vector<PositionLossRow>& rows) {
  std::string csv =
      "run,mode,interp,Lvalid,bucket,position_begin,position_end,tokens,mean_nll,extend,protocol,mean_kl,same_top\n";
  for (const auto& p : rows)
    csv += fmt::format("{},{},{},{},{},{},{},{},{:.6f},{},{},{}\n", p.run, p.mode, p.interp, p.Lvalid, p.bucket,
                       p.positionBegin, p.positionEnd, p.tokens, p.meanNll, p.extend, p.protocol,
                       p.compared ? fmt::format("{:.6g},{:.6f}", p.meanKl, p.sameTop) : std::string(","));
  writeTextAtomically(file, csv);
}

}  // namespace xtrap
