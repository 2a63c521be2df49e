// Retrieval prompts, their sweep grammar, the task mix and the interval: hand-counted lengths and
// positions, the words read back from the ids, and textbook interval values.
#include <catch2/catch.hpp>
#include <cctype>
#include <set>
#include <sstream>

#include "data/bpe_tokenizer.h"
#include "data/retrieval_prompt.h"
#include "data/task_mix.h"
#include "eval/depth_list.h"
#include "eval/eval_report.h"
#include "eval/retrieval_plot.h"
#include "eval/wilson_interval.h"
#include "scenario/results_table.h"
#include "util/atomic_file.h"

using namespace xtrap;

namespace {

// Every word the prompts use, plus words of a "natural" text, in a vocabulary of its own.
Vocabulary promptVocabulary() {
  std::string words =
      "<eos> <unk> there is an important information hidden inside a lot of irrelevant text . find it and remember i "
      "will quiz you about the grass green sky blue sun yellow here we go back again pass key what ? line value : in "
      "0 1 2 3 4 5 6 7 8 9 red black white old new small large great long high early late major young dark bright "
      "strong main local royal northern southern eastern western free final golden silver ancient modern quiet wild "
      "open lost broken heavy light deep river city house army ship king road song film game church school island "
      "bridge tower station castle garden village forest lake mountain street market court temple hill valley field "
      "horse queen star stone wall gate door tree alpha beta gamma";
  std::istringstream in(words);
  std::vector<std::string> list;
  std::set<std::string> seen;
  for (std::string w; in >> w;)
    if (seen.insert(w).second) list.push_back(w);
  return Vocabulary(list);
}

std::string wordsOf(const Vocabulary& v, const std::vector<int32_t>& ids, int64_t from, int64_t count) {
  std::string out;
  for (int64_t i = from; i < from + count; ++i) out += (i > from ? " " : "") + v.word(ids[size_t(i)]);
  return out;
}

bool isDigitWord(const std::string& w) { return w.size() == 1 && w[0] >= '0' && w[0] <= '9'; }

}  // namespace

TEST_CASE("passkey prompt: exact length, the needle at its depth, the answer is the key") {
  Vocabulary v = promptVocabulary();
  RetrievalPromptBuilder builder(wordPhraseEncoder(v), {});
  // Instruction 29 words, needle 4 + 5 + 4 + 5 + 5, question 10, answer 5 (counted by hand).
  REQUIRE(builder.minimumLength(RetrievalTask::Passkey) == 67);
  for (int64_t length : {67, 68, 200, 1001}) {
    for (double depth : {0.0, 0.25, 0.5, 1.0}) {
      RetrievalPrompt p = builder.build({RetrievalTask::Passkey, Filler::Repeat, 7, length, depth, 3});
      REQUIRE(int64_t(p.tokens.size()) == length);
      int64_t filler = length - 67;
      CHECK(p.needleBegin == 29 + std::llround(depth * double(filler)));
      CHECK(wordsOf(v, p.tokens, p.needleBegin, 4) == "the pass key is");
      std::string key = wordsOf(v, p.tokens, p.needleBegin + 4, 5);
      CHECK(wordsOf(v, p.tokens, p.needleBegin + 9, 4) == ". remember it .");
      CHECK(wordsOf(v, p.tokens, p.needleBegin + 13, 5) == key);
      CHECK(wordsOf(v, p.tokens, p.needleBegin + 18, 5) == "is the pass key .");
      REQUIRE(p.answerBegin == length - 5);
      CHECK(wordsOf(v, p.tokens, p.answerBegin, 5) == key);
      CHECK(wordsOf(v, p.tokens, p.answerBegin - 10, 10) == "what is the pass key ? the pass key is");
      CHECK(wordsOf(v, p.tokens, 0, 3) == "there is an");
      for (int64_t i = 0; i < 5; ++i) CHECK(isDigitWord(v.word(p.tokens[size_t(p.answerBegin + i)])));
      for (int32_t id : p.tokens) CHECK((id >= 0 && id < v.size() && id != v.unk()));
    }
  }
  // The filler cycle runs on across the needle: the first filler words are the cycle's.
  RetrievalPrompt p = builder.build({RetrievalTask::Passkey, Filler::Repeat, 1, 200, 1.0, 0});
  CHECK(wordsOf(v, p.tokens, 29, 8) == "the grass is green . the sky is");
}

TEST_CASE("retrieval prompts are a function of (seed, length, depth, trial)") {
  Vocabulary v = promptVocabulary();
  RetrievalPromptBuilder builder(wordPhraseEncoder(v), {});
  for (RetrievalTask task : {RetrievalTask::Passkey, RetrievalTask::KvLines}) {
    PromptRequest r{task, Filler::Repeat, 5, 300, 0.4, 2};
    CHECK(builder.build(r).tokens == builder.build(r).tokens);
    std::set<std::vector<int32_t>> answers;
    for (int64_t trial = 0; trial < 20; ++trial) {
      r.trial = trial;
      RetrievalPrompt p = builder.build(r);
      answers.insert({p.tokens.begin() + p.answerBegin, p.tokens.end()});
    }
    CHECK(answers.size() >= 18);  // 10^5 keys: collisions among 20 are rare
  }
}

TEST_CASE("kv-lines prompt: whole lines, distinct keys, the asked line at its depth") {
  Vocabulary v = promptVocabulary();
  RetrievalPromptBuilder builder(wordPhraseEncoder(v), {});
  // A line "line ADJ NOUN : value is d d d d d ." is 12 words; the question 12 + 5 answer words.
  CHECK(builder.minimumLength(RetrievalTask::KvLines) == 2 * 12 + 17);
  int64_t length = 100;  // (100 - 17) / 12 = 6 lines, 11 words of padding before them
  for (double depth : {0.0, 0.5, 1.0}) {
    RetrievalPrompt p = builder.build({RetrievalTask::KvLines, Filler::Repeat, 3, length, depth, 1});
    REQUIRE(int64_t(p.tokens.size()) == length);
    int64_t asked = std::llround(depth * 5);
    CHECK(p.needleBegin == 11 + 12 * asked);
    std::set<std::string> keys;
    for (int64_t line = 0; line < 6; ++line) {
      int64_t at = 11 + 12 * line;
      CHECK(v.word(p.tokens[size_t(at)]) == "line");
      CHECK(wordsOf(v, p.tokens, at + 3, 3) == ": value is");
      keys.insert(wordsOf(v, p.tokens, at + 1, 2));
    }
    CHECK(keys.size() == 6);
    std::string askedKey = wordsOf(v, p.tokens, p.needleBegin + 1, 2);
    CHECK(wordsOf(v, p.tokens, p.answerBegin - 12, 12) == "what is the value in line " + askedKey + " ? the value is");
    CHECK(wordsOf(v, p.tokens, p.answerBegin, 5) == wordsOf(v, p.tokens, p.needleBegin + 6, 5));
  }
}

TEST_CASE("natural filler is a contiguous slice of the given text") {
  Vocabulary v = promptVocabulary();
  std::vector<int32_t> text;
  for (int i = 0; i < 500; ++i) text.push_back(v.id(i % 3 == 0 ? "alpha" : i % 3 == 1 ? "beta" : "gamma"));
  RetrievalPromptBuilder builder(wordPhraseEncoder(v), text);
  RetrievalPrompt p = builder.build({RetrievalTask::Passkey, Filler::Natural, 1, 167, 0.0, 0});
  // depth 0: the 100 filler words follow the needle, a cyclic alpha beta gamma run.
  int64_t after = p.needleBegin + 23;
  for (int64_t i = after + 1; i < after + 100; ++i) {
    std::string prev = v.word(p.tokens[size_t(i - 1)]), cur = v.word(p.tokens[size_t(i)]);
    CHECK(((prev == "alpha" && cur == "beta") || (prev == "beta" && cur == "gamma") ||
           (prev == "gamma" && cur == "alpha")));
  }
  CHECK_THROWS_WITH(builder.build({RetrievalTask::Passkey, Filler::Natural, 1, 1000, 0.0, 0}),
                    Catch::Contains("needs a text at least that long"));
}

TEST_CASE("retrieval prompts reject what they cannot build") {
  Vocabulary v = promptVocabulary();
  RetrievalPromptBuilder builder(wordPhraseEncoder(v), {});
  CHECK_THROWS_WITH(builder.build({RetrievalTask::Passkey, Filler::Repeat, 1, 66, 0.5, 0}),
                    Catch::Contains("at least 67 tokens"));
  CHECK_THROWS_WITH(builder.build({RetrievalTask::Passkey, Filler::Repeat, 1, 100, 1.5, 0}), Catch::Contains("[0, 1]"));
  CHECK_THROWS_WITH(builder.build({RetrievalTask::KvLines, Filler::Repeat, 1, 100000, 0.5, 0}),
                    Catch::Contains("distinct keys"));
  Vocabulary small({"<eos>", "<unk>", "the"});
  CHECK_THROWS_WITH(RetrievalPromptBuilder(wordPhraseEncoder(small), {}), Catch::Contains("the vocabulary lacks"));
  CHECK_THROWS_WITH(parseRetrievalTask("needle"), Catch::Contains("passkey, kv-lines"));
  CHECK_THROWS_WITH(parseFiller("lorem"), Catch::Contains("repeat, natural"));
}

TEST_CASE("depth lists (--depths): grammar") {
  CHECK(parseDepthList("0..100:25") == std::vector<double>{0, 25, 50, 75, 100});
  CHECK(parseDepthList("50,0,50") == std::vector<double>{0, 50});
  CHECK(parseDepthList("0..10:4") == std::vector<double>{0, 4, 8, 10});
  CHECK_THROWS_WITH(parseDepthList("101"), Catch::Contains("at most 100"));
  CHECK_THROWS_WITH(parseDepthList("0..100"), Catch::Contains("needs a step"));
  CHECK_THROWS_WITH(parseDepthList("x"), Catch::Contains("whole percent"));
  CHECK_THROWS_WITH(parseDepthList("10,,20"), Catch::Contains("empty item"));
}

TEST_CASE("Wilson interval: textbook values") {
  auto close = [](ProportionInterval i, double lo, double hi) {
    return std::abs(i.low - lo) < 1e-4 && std::abs(i.high - hi) < 1e-4;
  };
  CHECK(close(wilsonInterval(0, 10), 0.0, 0.2775));
  CHECK(close(wilsonInterval(5, 10), 0.2366, 0.7634));
  CHECK(close(wilsonInterval(50, 50), 0.9287, 1.0));
  CHECK(close(wilsonInterval(45, 50), 0.7864, 0.9565));
  CHECK_THROWS(wilsonInterval(3, 2));
}

TEST_CASE("task mix (--task-mix): grammar, shares and determinism") {
  TaskMix mix = parseTaskMix("kv-lines:0.1,passkey:0.25");
  CHECK(mix.passkey == 0.25);
  CHECK(mix.kvLines == 0.1);
  CHECK(taskMixSpec(mix) == "passkey:0.25,kv-lines:0.1");
  CHECK(parseTaskMix("").empty());
  CHECK_THROWS_WITH(parseTaskMix("passkey"), Catch::Contains("TASK:SHARE"));
  CHECK_THROWS_WITH(parseTaskMix("passkey:0"), Catch::Contains("(0, 1]"));
  CHECK_THROWS_WITH(parseTaskMix("passkey:0.7,kv-lines:0.5"), Catch::Contains("more than 1"));
  CHECK_THROWS_WITH(parseTaskMix("passkey:0.1,passkey:0.2"), Catch::Contains("twice"));
  CHECK_THROWS_WITH(parseTaskMix("needle:0.1"), Catch::Contains("unknown retrieval task"));

  Vocabulary v = promptVocabulary();
  RetrievalPromptBuilder builder(wordPhraseEncoder(v), {});
  int passkeys = 0, lines = 0, n = 4000;
  for (int row = 0; row < n; ++row) {
    auto task = taskSequence(mix, Filler::Repeat, builder, 9, row / 16, row % 16, 129);
    auto again = taskSequence(mix, Filler::Repeat, builder, 9, row / 16, row % 16, 129);
    REQUIRE(task.has_value() == again.has_value());
    if (!task) continue;
    CHECK(task->tokens == again->tokens);
    CHECK(task->tokens.size() == 129);
    (v.word(task->tokens[0]) == "there" ? passkeys : lines) += 1;
  }
  // Binomial counts: within 4 standard deviations of n * share.
  CHECK(std::abs(passkeys - 0.25 * n) < 4 * std::sqrt(n * 0.25 * 0.75));
  CHECK(std::abs(lines - 0.1 * n) < 4 * std::sqrt(n * 0.1 * 0.9));
}

TEST_CASE("retrieval rows: CSV round trip, older files read as perplexity, tables and heatmap") {
  EvalRow r;
  r.run = "alibi";
  r.pos = "alibi";
  r.Ltrain = 64, r.Lvalid = 128, r.interp = "linear", r.scale = 2, r.mode = "prompt";
  r.task = "passkey", r.filler = "natural", r.depth = 30, r.trials = 50, r.correct = 45;
  r.accuracy = 0.9, r.accuracyLow = 0.7864, r.accuracyHigh = 0.9565, r.answerLogProb = -0.25;
  EvalRow p;
  p.run = "alibi", p.pos = "alibi", p.Ltrain = 64, p.Lvalid = 64, p.ppl = 100;
  auto dir = std::filesystem::temp_directory_path() / "xtrap_retrieval_rows";
  std::filesystem::create_directories(dir);
  for (const char* name : {"rows.csv", "rows.json"}) {
    INFO(name);
    writeEvalRows(dir / name, {p, r});
    auto back = readEvalRows(dir / name);
    REQUIRE(back.size() == 2);
    CHECK(!back[0].isRetrieval());
    CHECK(back[1].task == "passkey");
    CHECK(back[1].filler == "natural");
    CHECK(back[1].depth == 30);
    CHECK(back[1].trials == 50);
    CHECK(back[1].correct == 45);
    CHECK(back[1].accuracyLow == Approx(0.7864));
    CHECK(back[1].answerLogProb == Approx(-0.25));
  }
  writeTextAtomically(dir / "old.csv", "run,pos,L_train,Lvalid,mode,interp,ppl\nalibi,alibi,64,64,nonoverlap,none,9\n");
  CHECK(readEvalRows(dir / "old.csv")[0].task == "perplexity");
  std::string table = formatEvalTable({p, r});
  CHECK_THAT(table, Catch::Contains("90.0%") && Catch::Contains("[78.6, 95.7]%"));
  std::string md = formatRetrievalMarkdownTable("passkey", {r});
  CHECK_THAT(md, Catch::Contains("alibi (linear a=2)") && Catch::Contains("| 90 / 90 |"));
  HeatmapScript h = retrievalHeatmapScript({p, r});
  CHECK(h.panels == 1);
  CHECK_THAT(h.script, Catch::Contains("'128' 0") && Catch::Contains("0 0 90.0"));
  const std::vector<EvalRow> perplexityOnly{p};  // named: a braced temporary inside the throw check
  CHECK_THROWS_WITH(retrievalHeatmapScript(perplexityOnly), Catch::Contains("no retrieval rows"));
  std::filesystem::remove_all(dir);
}

TEST_CASE("tables and plots name an interpolation with its factor when one a serves the row") {
  EvalRow r;
  r.interp = "none";
  CHECK(interpolationDisplay(r) == "none");
  r.interp = "linear", r.scale = 8;
  CHECK(interpolationDisplay(r) == "linear a=8");
  r.interp = "ntk/leading-power-of-two", r.scale = 2.5;
  CHECK(interpolationDisplay(r) == "ntk/leading-power-of-two a=2.5");
  r.interp = "linear/per-length";
  CHECK(interpolationDisplay(r) == "linear/per-length");
  r.interp = "dynamic-ntk";
  CHECK(interpolationDisplay(r) == "dynamic-ntk");
  EvalRow a = r, b = r;
  a.run = b.run = "alibi", a.interp = b.interp = "linear", a.scale = b.scale = 4, a.Lvalid = 64, b.Lvalid = 256;
  a.ppl = 10, b.ppl = 12;
  CHECK_THAT(formatMarkdownTable("t", {a, b}), Catch::Contains("| alibi (linear a=4) |"));
}

TEST_CASE("passkey prompts in a BPE vocabulary read back as the words: byte-level and SentencePiece-style") {
  // GPT-NeoX writes a digit word as one token (" 4"), the SentencePiece-style file (Llama 2's
  // settings) as its own pieces; either way the prompt decodes to the format's words.
  for (const char* file :
       {"tests/tokenizer/gpt-neox-20b_tokenizer.json", "tests/tokenizer/sentencepiece-bpe_tokenizer.json"}) {
    INFO(file);
    BpeTokenizer tokenizer = BpeTokenizer::fromFile(file);
    RetrievalPromptBuilder builder(bpePhraseEncoder(tokenizer), {});
    RetrievalPrompt p = builder.build({RetrievalTask::Passkey, Filler::Repeat, 5, 300, 0.5, 2});
    REQUIRE(p.tokens.size() == 300);
    std::string answer = tokenizer.decode({p.tokens.begin() + p.answerBegin, p.tokens.end()});
    answer.erase(0, answer.find_first_not_of(' '));
    REQUIRE(answer.size() == 9);  // "d d d d d"
    for (size_t i = 0; i < answer.size(); ++i) CHECK((i % 2 ? answer[i] == ' ' : std::isdigit(answer[i]) != 0));
    std::string text = tokenizer.decode(p.tokens);
    CHECK(text.find("the pass key is " + answer + " . remember it . " + answer + " is the pass key .") !=
          std::string::npos);
    CHECK(text.substr(text.size() - 16 - answer.size()) == "the pass key is " + answer);
    std::string needle = tokenizer.decode({p.tokens.begin() + p.needleBegin, p.tokens.begin() + p.needleBegin + 4});
    CHECK(needle.find("the pass") != std::string::npos);
  }
}
