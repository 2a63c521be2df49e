// Retrieval scoring and the task mix: a hand-built model whose predictions are known in closed
// form, encoder masking of the answers, interpolation applied to retrieval rows, and task
// sequences in the training batches.
#include <catch2/catch.hpp>
#include <cmath>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>

#include "data/task_mix.h"
#include "eval/evaluate_run.h"
#include "eval/greedy_generation.h"
#include "eval/retrieval_score.h"
#include "run/checkpoint.h"
#include "scenario/run_identity.h"
#include "test_support.h"
#include "train/objective.h"

using namespace xtrap;
using namespace xtrap::test;

namespace {

// A model that predicts the token it reads: one-hot embeddings (V = C = 16), every attention and
// FFN output zero (the residual stream is the scaled embedding), LayerNorms the identity affine,
// the tied full softmax. Position i's logits are LN(sqrt(C) e_{t_i}) E^T = LN(4 e_t).
Transformer identityModel(const std::string& arch) {
  ModelConfig c = tinyConfig("alibi", arch);
  c.vocabSize = 16;
  c.dModel = 16;
  c.layers = 1;
  c.head = "lm";
  Transformer model(c);
  torch::NoGradGuard g;
  for (auto& p : model->named_parameters()) {
    p.value().zero_();
    bool norm = p.key().find("ln") != std::string::npos && p.key().find("weight") != std::string::npos;
    if (norm) p.value().fill_(1.0);
  }
  model->tokenEmbedding->weight.copy_(torch::eye(16));
  model->place(ExecutionContext{});
  return model;
}

// log p(k | t) of that model, by hand: LN(4 e_t) has mean 1/4 and variance 15/16 over 16 values.
double handLogProb(bool same) {
  double sd = std::sqrt(15.0 / 16.0 + 1e-5);
  double own = (4 - 0.25) / sd, other = -0.25 / sd;
  double lse = std::log(std::exp(own) + 15 * std::exp(other));
  return (same ? own : other) - lse;
}

RetrievalPrompt prompt(std::vector<int32_t> tokens, int64_t answerBegin) {
  RetrievalPrompt p;
  p.tokens = std::move(tokens);
  p.answerBegin = answerBegin;
  return p;
}

}  // namespace

TEST_CASE("decoder retrieval: a trial is correct only when every answer token is the argmax") {
  Transformer model = identityModel("decoder");
  // The model predicts "the same token again": answers 3 3 after ... 3 are right, 4 5 are not,
  // and 3 5 after 3 gets one of two: wrong as a trial.
  std::vector<RetrievalPrompt> prompts = {prompt({1, 2, 3, 3, 3}, 3), prompt({1, 2, 3, 4, 5}, 3),
                                          prompt({1, 2, 3, 3, 5}, 3)};
  RetrievalScoreOptions opt;
  opt.batch = 2;
  opt.queryBlock = 0;
  RetrievalTotals t = scoreRetrieval(model, prompts, opt);
  CHECK(t.trials == 3);
  CHECK(t.correct == 1);
  CHECK(t.answerTokens == 6);
  CHECK(t.answerLogProb == Approx(3 * handLogProb(true) + 3 * handLogProb(false)).epsilon(1e-5));
}

TEST_CASE("encoder retrieval: the answers are masked, so the model must recover them") {
  Transformer model = identityModel("encoder");
  std::vector<RetrievalPrompt> prompts = {prompt({1, 2, 3, 3, 3}, 3), prompt({4, 5, 6, 7, 8}, 2)};
  RetrievalScoreOptions opt;
  opt.batch = 8;
  opt.queryBlock = 0;
  opt.mlm.maskId = 15;
  // Unmasked, the identity model would read every answer; masked it reads <mask> (id 15) and
  // gives each answer token the "other token" probability.
  RetrievalTotals t = scoreRetrieval(model, prompts, opt);
  CHECK(t.trials == 2);
  CHECK(t.correct == 0);
  CHECK(t.answerTokens == 5);
  CHECK(t.answerLogProb == Approx(5 * handLogProb(false)).epsilon(1e-5));
  // With <bos> prepended the answers' rows move one column right and still read <mask>.
  opt.mlm.bosId = 14;
  RetrievalTotals withBos = scoreRetrieval(model, prompts, opt);
  CHECK(withBos.correct == 0);
  CHECK(withBos.answerLogProb == Approx(5 * handLogProb(false)).epsilon(1e-5));
}

TEST_CASE("retrieval rows: every interpolation applies, with its factor, at each length and depth") {
  RunInfo run = trainTiny("retrieval-interp", tinyConfig("alibi"), 2);
  EvalRequest req;
  req.runs = {run.dir};
  req.task = "passkey";
  req.lvalids = {80, 160};
  req.depths = {0, 100};
  req.trials = 3;
  req.interps = {Interp::None, Interp::Linear, Interp::DynamicNtk};
  req.device = "cpu";
  req.progress = false;
  req.threads = 1;
  auto rows = evaluateRuns(req);
  REQUIRE(rows.size() == 3 * 2 * 2);
  for (const EvalRow& r : rows) {
    CHECK(r.task == "passkey");
    CHECK(r.trials == 3);
    CHECK(r.tokensScored == 3 * 5);
    CHECK((r.depth == 0 || r.depth == 100));
    double want = r.interp == "none" ? 1.0 : r.interp == "linear" ? 160.0 / 16 : double(r.Lvalid) / 16;
    CHECK(r.scale == Approx(want));
    CHECK(r.accuracyLow <= r.accuracy);
    CHECK(r.accuracy <= r.accuracyHigh);
  }
  // The NTK-ALiBi authors' protocol: a = Lvalid / L_train for each row.
  req.scalePerLength = true;
  req.interps = {Interp::Linear};
  for (const EvalRow& r : evaluateRuns(req)) {
    CHECK(r.interp == "linear/per-length");
    CHECK(r.scale == Approx(double(r.Lvalid) / 16));
  }
  // Linear divides every slope by a = 10: the first of 4 heads' slopes, 2^-2, becomes 1/40.
  auto firstSlope = [](const std::string& slopes) { return std::stod(slopes.substr(0, slopes.find(' '))); };
  CHECK(firstSlope(rows[0].slopes) == Approx(0.25));
  CHECK(firstSlope(rows[4].slopes) == Approx(0.025));
  std::filesystem::remove_all(run.dir);
}

TEST_CASE("task mix: decoder task rows are trained as the prompts' own text") {
  const Corpus& corpus = shippedCorpus();
  ModelConfig c = tinyConfig("alibi");
  c.vocabSize = corpus.vocab.size();
  c.contextLength = 80;
  Transformer model(c);
  model->place(ExecutionContext{});
  model->eval();
  RetrievalPromptBuilder builder(wordPhraseEncoder(corpus.vocab), corpus.train);
  TaskRows tasks;
  std::vector<int32_t> text;  // the same prompts laid end to end as a stream
  std::vector<int64_t> offsets;
  for (int64_t b = 0; b < 3; ++b) {
    tasks.push_back(builder.build(
        {b == 1 ? RetrievalTask::KvLines : RetrievalTask::Passkey, Filler::Natural, 4, 81, 0.3 * double(b), b}));
    offsets.push_back(int64_t(text.size()));
    text.insert(text.end(), tasks.back()->tokens.begin(), tasks.back()->tokens.end());
  }
  std::vector<int64_t> streamStarts = {0, 1000, 2000};  // read from the train stream, then replaced
  MlmTokens none;
  auto mixed = trainingLoss(model, corpus.train, streamStarts, 1, 0.15, none, 0, tasks);
  auto plain = trainingLoss(model, text, offsets, 1, 0.15, none);
  CHECK(mixed.tokens == 3 * 80);
  CHECK(mixed.loss.item<double>() == Approx(plain.loss.item<double>()).epsilon(1e-6));
}

// An encoder at L = 80 on the shipped corpus, its masking tokens, and a batch of two rows whose
// row 1 is a passkey prompt (row 0 the stream's).
struct EncoderTaskRows {
  ModelConfig c;
  MlmTokens mlm;
  TaskRows tasks;
};
EncoderTaskRows encoderWithPasskeyRow(const Corpus& corpus) {
  ModelConfig c = tinyConfig("alibi", "encoder");
  c.contextLength = 80;
  c.vocabSize = corpus.vocab.size() + c.specialTokens();
  RetrievalPromptBuilder builder(wordPhraseEncoder(corpus.vocab), corpus.train);
  TaskRows tasks(2);
  tasks[1] = builder.build({RetrievalTask::Passkey, Filler::Repeat, 2, sequenceSpan(c), 0.5, 0});
  return {c, c.mlmTokens(corpus.vocab), tasks};
}

TEST_CASE("task mix: an encoder's task rows always mask and score their answers") {
  const Corpus& corpus = shippedCorpus();
  const auto [c, mlm, tasks] = encoderWithPasskeyRow(corpus);
  const RetrievalPrompt& task = *tasks[1];
  MaskedBatch m = encoderTrainingBatch(c, corpus.train, {0, 5000}, 3, 0.15, mlm, 0, tasks);
  int64_t T = m.inputs.size(1), shift = mlm.bosColumns();
  auto positions = m.positions.accessor<int64_t, 1>();
  auto targets = m.targets.accessor<int64_t, 1>();
  int64_t answersScored = 0;
  for (int64_t i = 0; i < positions.size(0); ++i) {
    int64_t row = positions[i] / T, column = positions[i] % T - shift;
    if (row == 1 && column >= task.answerBegin) {
      ++answersScored;
      CHECK(targets[i] == task.tokens[size_t(column)]);
      CHECK(m.inputs[1][shift + column].item<int64_t>() == mlm.maskId);
    }
  }
  CHECK(answersScored == task.answerLength());
  // The rest of the task row is the prompt wherever it was not selected.
  CHECK(m.inputs[1][shift].item<int64_t>() == task.tokens[0]);
}

TEST_CASE("task loss answer: a decoder's task rows score their answer targets only, other rows every target") {
  const Corpus& corpus = shippedCorpus();
  ModelConfig c = tinyConfig("alibi");
  c.vocabSize = corpus.vocab.size();
  c.contextLength = 80;
  Transformer model(c);
  model->place(ExecutionContext{});
  model->eval();
  RetrievalPromptBuilder builder(wordPhraseEncoder(corpus.vocab), corpus.train);
  TaskRows tasks(2);
  tasks[0] = builder.build({RetrievalTask::Passkey, Filler::Repeat, 4, 81, 0.5, 0});
  const RetrievalPrompt& task = *tasks[0];
  std::vector<int64_t> starts = {0, 1000};
  MlmTokens none;
  LossResult answer = trainingLoss(model, corpus.train, starts, 1, 0.15, none, 0, tasks, true);
  // By hand: every next-token NLL of both rows, then the answer's targets of row 0 and all of row 1.
  auto batch = decoderTrainingBatch(c, corpus.train, starts, tasks);  // (2, 81)
  torch::NoGradGuard noGrad;
  auto nll = model
                 ->tokenNll(model->features(batch.narrow(1, 0, 80)).reshape({-1, c.dModel}),
                            batch.narrow(1, 1, 80).reshape({-1}))
                 .view({2, 80});
  double sum = nll[1].sum().item<double>();
  for (int64_t k = 0; k < task.answerLength(); ++k) {
    int64_t target = task.answerBegin - 1 + k;  // predicts prompt token answerBegin + k
    CHECK(batch[0][target + 1].item<int64_t>() == task.tokens[size_t(task.answerBegin + k)]);
    sum += nll[0][target].item<double>();
  }
  CHECK(answer.tokens == 80 + task.answerLength());
  CHECK(answer.loss.item<double>() == Approx(sum / double(80 + task.answerLength())).epsilon(1e-6));
  // Without task rows the option changes nothing.
  LossResult plain = trainingLoss(model, corpus.train, starts, 1, 0.15, none);
  LossResult plainAnswer = trainingLoss(model, corpus.train, starts, 1, 0.15, none, 0, {}, true);
  CHECK(plainAnswer.tokens == plain.tokens);
  CHECK(plainAnswer.loss.item<double>() == Approx(plain.loss.item<double>()).epsilon(1e-9));
}

TEST_CASE("task loss answer: an encoder's task rows select their answer only") {
  const Corpus& corpus = shippedCorpus();
  const auto [c, mlm, tasks] = encoderWithPasskeyRow(corpus);
  MaskedBatch all = encoderTrainingBatch(c, corpus.train, {0, 5000}, 3, 0.15, mlm, 0, tasks);
  MaskedBatch answer = encoderTrainingBatch(c, corpus.train, {0, 5000}, 3, 0.15, mlm, 0, tasks, true);
  int64_t T = answer.inputs.size(1);
  auto rowsOf = [&](const MaskedBatch& m, int64_t row) {
    int64_t n = 0;
    for (int64_t i = 0; i < m.positions.size(0); ++i) n += m.positions[i].item<int64_t>() / T == row;
    return n;
  };
  CHECK(rowsOf(answer, 1) == tasks[1]->answerLength());
  CHECK(rowsOf(all, 1) > tasks[1]->answerLength());  // the usual selection besides the answer
  CHECK(rowsOf(answer, 0) == rowsOf(all, 0));        // a stream row as always
}

TEST_CASE("task mix: recorded in run.json and the run identity") {
  ModelConfig c = tinyConfig("alibi");
  c.contextLength = 80;
  RunInfo run = trainTiny("retrieval-mix", c, 2, 1, [](TrainConfig& t) { t.taskMix = "passkey:0.5"; });
  RunInfo back = readRunInfo(run.dir);
  CHECK(back.train.taskMix == "passkey:0.5");
  TrainConfig plain = back.train;
  plain.taskMix.clear();
  CHECK(runIdentity(back.model, back.train) != runIdentity(back.model, plain));
  CHECK(runIdentity(back.model, plain).dump().find("task_mix") == std::string::npos);  // old runs keep their hash
  // Every validation (here the final one) probes each task of the mix at L: 32 prompts at depths
  // k / 31, prompt seed 1; the logged figures are those prompts' teacher-forced scores.
  std::ifstream log(run.dir / "train.jsonl");
  nlohmann::json last;
  for (std::string line; std::getline(log, line);) last = nlohmann::json::parse(line);
  REQUIRE(last.contains("tasks"));
  REQUIRE(last["tasks"].size() == 1);
  Corpus corpus = loadWikiText(back.train.dataDir);
  RetrievalPromptBuilder builder(wordPhraseEncoder(corpus.vocab), corpus.train);
  std::vector<RetrievalPrompt> prompts;
  for (int64_t k = 0; k < 32; ++k)
    prompts.push_back(builder.build({RetrievalTask::Passkey, Filler::Repeat, 1, 80, double(k) / 31, k}));
  Transformer model = loadTrainedModel(back, ExecutionContext{});
  RetrievalTotals want = scoreRetrieval(model, prompts, {});
  CHECK(double(last["tasks"]["passkey"]["accuracy"]) == Approx(double(want.correct) / 32));
  CHECK(double(last["tasks"]["passkey"]["answer_logprob"]) ==
        Approx(want.answerLogProb / double(want.answerTokens)).epsilon(1e-5));
  std::filesystem::remove_all(run.dir);
}

TEST_CASE("task mix: a task whose prompts are longer than L is refused before the run is written") {
  ModelConfig c = tinyConfig("alibi");  // L = 16: passkey needs 67 tokens
  auto dir = std::filesystem::temp_directory_path() / "xtrap-test-run-retrieval-too-short";
  CHECK_THROWS_WITH(
      trainTiny("retrieval-too-short", c, 2, 1, [](TrainConfig& t) { t.taskMix = "passkey:0.001"; }),
      Catch::Contains("--task-mix passkey: its prompts need at least 67 tokens; the training sequences have 16"));
  CHECK(!std::filesystem::exists(dir / "run.json"));
}

TEST_CASE("eval --log-samples: one line per retrieval trial, and the lines recount each row") {
  RunInfo run = trainTiny("log-samples", tinyConfig("alibi"), 2);
  EvalRequest req;
  req.runs = {run.dir};
  req.lvalids = {120, 160};
  req.depths = {0, 50, 100};
  req.trials = 4;
  req.device = "cpu";
  req.progress = false;
  req.threads = 1;
  req.logSamples = true;
  for (const char* task : {"passkey", "niah-multikey", "variable-tracking"}) {
    INFO(task);
    req.task = task;
    std::vector<std::string> lines;
    auto rows = evaluateRuns(req, nullptr, &lines);
    REQUIRE(rows.size() == 2 * 3);
    REQUIRE(lines.size() == 2 * 3 * 4);
    for (const EvalRow& r : rows) {
      int64_t trials = 0, correct = 0, tokens = 0;
      double logProb = 0;
      for (const auto& line : lines) {
        auto j = nlohmann::json::parse(line);
        if (j["Lvalid"] != r.Lvalid || j["depth"] != r.depth) continue;
        CHECK(j["kind"] == "retrieval");
        CHECK(j["task"] == task);
        CHECK(j["prompt_tokens"] == r.Lvalid);
        auto gold = j["gold_tokens"].get<std::vector<int64_t>>();
        auto predicted = j["predicted_tokens"].get<std::vector<int64_t>>();
        auto right = j["token_correct"].get<std::vector<bool>>();
        REQUIRE(gold.size() == predicted.size());
        REQUIRE(right.size() == gold.size());
        bool all = true;
        for (size_t i = 0; i < gold.size(); ++i) {
          CHECK(right[i] == (gold[i] == predicted[i]));
          all = all && right[i];
        }
        CHECK(j["correct"] == all);
        CHECK(int64_t(j["answer_position"]) + int64_t(gold.size()) == r.Lvalid);
        CHECK(int64_t(j["needle_position"]) < int64_t(j["answer_position"]));
        if (std::string(task) == "passkey") {
          std::string prompt = j["prompt"];
          CHECK(prompt.substr(prompt.size() - 38) == "what is the pass key ? the pass key is");
          CHECK(j["answer_items"] == 1);
        }
        if (std::string(task) == "variable-tracking") CHECK(j["answer_items"] == 5);
        trials += 1;
        correct += all ? 1 : 0;
        tokens += int64_t(gold.size());
        for (double lp : j["token_logprob"].get<std::vector<double>>()) logProb += lp;
      }
      CHECK(trials == r.trials);
      CHECK(correct == r.correct);
      CHECK(tokens == r.tokensScored);
      CHECK(logProb / double(tokens) == Approx(r.answerLogProb).epsilon(1e-9));
    }
  }
  req.logTrials = 2;  // the first two trials of each cell
  std::vector<std::string> firstTwo;
  evaluateRuns(req, nullptr, &firstTwo);
  REQUIRE(firstTwo.size() == 2 * 3 * 2);
  for (const auto& line : firstTwo) CHECK(nlohmann::json::parse(line)["trial"] < 2);
  std::filesystem::remove_all(run.dir);
}

TEST_CASE("eval --log-samples: perplexity by WikiText article, as the file's headings delimit them") {
  RunInfo run = trainTiny("log-documents", tinyConfig("alibi"), 2);
  EvalRequest req;
  req.runs = {run.dir};
  req.lvalids = {64};
  req.modes = {"nonoverlap", "sliding"};
  req.maxTokens = 30000;
  req.device = "cpu";
  req.progress = false;
  req.threads = 1;
  req.logSamples = true;
  // The articles of the valid file's first 30,000 tokens, counted from its lines: each line is
  // its words and an <eos>; an article starts at a line " = Title = " (one "=" each side).
  std::ifstream in(std::string(XTRAP_DEFAULT_DATA_DIR) + "/wiki.valid.tokens");
  std::vector<std::pair<int64_t, std::string>> articles;
  int64_t token = 0;
  for (std::string line; std::getline(in, line) && token < req.maxTokens;) {
    std::istringstream words(line);
    std::vector<std::string> w;
    for (std::string x; words >> x;) w.push_back(x);
    if (w.size() >= 3 && w.front() == "=" && w.back() == "=" && w[1] != "=") {
      std::string title;
      for (size_t i = 1; i + 1 < w.size(); ++i) title += (i > 1 ? " " : "") + w[i];
      articles.emplace_back(token, title);
    }
    token += int64_t(w.size()) + 1;
  }
  REQUIRE(articles.size() >= 3);
  REQUIRE(articles.front().first > 0);  // the file opens with a blank line: a leading document
  std::vector<std::string> lines;
  auto rows = evaluateRuns(req, nullptr, &lines);
  REQUIRE(rows.size() == 2);
  REQUIRE(lines.size() == 2 * (articles.size() + 1));
  for (const EvalRow& r : rows) {
    INFO(r.mode);
    int64_t tokens = 0;
    double nll = 0;
    size_t d = 0;
    for (const auto& line : lines) {
      auto j = nlohmann::json::parse(line);
      if (j["mode"] != r.mode) continue;
      CHECK(j["kind"] == "document");
      CHECK(j["document"] == d);
      int64_t first = d == 0 ? 0 : articles[d - 1].first;
      int64_t end = d < articles.size() ? articles[d].first : req.maxTokens;
      CHECK(j["first_token"] == first);
      CHECK(j["title"] == (d == 0 ? std::string() : articles[d - 1].second));
      CHECK(j["tokens"] == end - first);  // a decoder scores every token once
      tokens += int64_t(j["tokens"]);
      nll += double(j["nll"]);
      ++d;
    }
    CHECK(tokens == r.tokensScored);
    CHECK(nll / double(tokens) == Approx(r.nll).epsilon(1e-9));
  }
  std::filesystem::remove_all(run.dir);
}

TEST_CASE("incremental decoding: a KV cache gives the full forward's features, for every position family") {
  struct Case {
    const char* name;
    std::function<void(ModelConfig&)> set;
  };
  std::vector<Case> cases = {
      {"alibi", [](ModelConfig&) {}},
      {"rotary", [](ModelConfig& c) { c.pos = "rotary"; }},
      {"t5", [](ModelConfig& c) { c.pos = "t5"; }},
      {"kerple-log", [](ModelConfig& c) { c.pos = "kerple-log"; }},
      {"fire", [](ModelConfig& c) { c.pos = "fire"; }},
      {"learned", [](ModelConfig& c) { c.pos = "learned"; }},
      {"sinusoidal", [](ModelConfig& c) { c.pos = "sinusoidal"; }},
      {"rotary, grouped kv, window 9 on layer 1, soft-cap",
       [](ModelConfig& c) {
         c.pos = "rotary";
         c.kvHeads = 2;
         c.attentionWindow = 9;
         c.windowedLayers = {1};
         c.attentionSoftcap = 5.0;
       }},
      {"alibi, window 7 on every layer", [](ModelConfig& c) { c.attentionWindow = 7; }},
  };
  for (const auto& k : cases) {
    INFO(k.name);
    ModelConfig c = tinyConfig("alibi");
    k.set(c);
    Transformer model(c);
    model->place(ExecutionContext{});
    model->eval();
    torch::NoGradGuard g;
    auto x = torch::randint(0, 50, {2, 40}, torch::kLong);
    auto full = model->features(x, {0, nullptr});  // (2, 40, C)
    KvCache cache;
    std::vector<torch::Tensor> parts{model->features(x.narrow(1, 0, 17), {}, &cache),
                                     model->features(x.narrow(1, 17, 13), {}, &cache)};
    for (int64_t t = 30; t < 40; ++t) parts.push_back(model->features(x.narrow(1, t, 1), {}, &cache));
    CHECK(cache.length == 40);
    CHECK(maxAbsDiff(torch::cat(parts, 1), full) < 1e-5);
  }
  Transformer encoder(tinyConfig("alibi", "encoder"));
  KvCache cache;
  CHECK_THROWS_WITH(encoder->features(torch::zeros({1, 4}, torch::kLong), {}, &cache), Catch::Contains("decoders"));
}

TEST_CASE("greedy generation of the answer equals teacher forcing: right exactly when every answer token is") {
  Transformer model = identityModel("decoder");
  // The identity model continues 3 with 3 3 ...: right for the answer 3 3, wrong for 4 5 and 3 5.
  std::vector<RetrievalPrompt> prompts = {prompt({1, 2, 3, 3, 3}, 3), prompt({1, 2, 3, 4, 5}, 3),
                                          prompt({1, 2, 3, 3, 5}, 3), prompt({7, 7, 7, 7, 7}, 2)};
  RetrievalScoreOptions opt;
  opt.queryBlock = 0;
  std::vector<RetrievalTrial> trials;
  scoreRetrieval(model, prompts, opt, &trials);
  for (size_t k = 0; k < prompts.size(); ++k) {
    const RetrievalPrompt& p = prompts[k];
    std::vector<int32_t> context(p.tokens.begin(), p.tokens.begin() + p.answerBegin);
    std::vector<int32_t> gold(p.tokens.begin() + p.answerBegin, p.tokens.end());
    Generation g = generateGreedy(model, context, p.answerLength(), 2);
    bool teacherRight = true;
    for (size_t j = 0; j < gold.size(); ++j) teacherRight = teacherRight && trials[k].predicted[j] == gold[j];
    CHECK((g.tokens == gold) == teacherRight);
    CHECK(g.tokens.front() == trials[k].predicted.front());  // the first step is the same prediction
    CHECK(g.logProbs.front() == Approx(handLogProb(true)).epsilon(1e-5));
  }
  CHECK(generateGreedy(model, {1, 2, 3}, 5, 0, {3}).tokens == std::vector<int32_t>{3});  // stops at a stop token
}
