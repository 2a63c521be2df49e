// Retrieval prompts, their sweep grammar, the task mix and the interval: hand-counted lengths and
// positions, the words read back from the ids, and textbook interval values.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cctype>
#include <cmath>
#include <functional>
#include <set>
#include <sstream>

#include "data/native_prompt.h"
#include "data/retrieval_prompt.h"
#include "data/task_mix.h"
#include "data/text_documents.h"
#include "data/tokenizer.h"
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
      "horse queen star stone wall gate door tree alpha beta gamma some special magic numbers number are within "
      "following them one for all , and var = question variables that assigned answer they track chain variable "
      "assignment";
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
  RetrievalPromptBuilder lacking(wordPhraseEncoder(small), {});  // fails the task asked for, when asked
  CHECK_THROWS_WITH(lacking.build({RetrievalTask::Passkey, Filler::Repeat, 1, 100, 0.5, 0}),
                    Catch::Contains("the vocabulary lacks"));
  CHECK_THROWS_WITH(lacking.minimumLength(RetrievalTask::VariableTracking), Catch::Contains("the vocabulary lacks"));
  CHECK_THROWS_WITH(parseRetrievalTask("needle"),
                    Catch::Contains("passkey, kv-lines, niah-multikey, niah-multivalue, niah-multiquery, "
                                    "variable-tracking"));
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
  CHECK(mix[RetrievalTask::Passkey] == 0.25);
  CHECK(mix[RetrievalTask::KvLines] == 0.1);
  CHECK(taskMixSpec(mix) == "passkey:0.25,kv-lines:0.1");
  CHECK(parseTaskMix("").empty());
  CHECK_THROWS_WITH(parseTaskMix("passkey"), Catch::Contains("TASK:SHARE"));
  CHECK_THROWS_WITH(parseTaskMix("passkey:0"), Catch::Contains("(0, 1]"));
  CHECK_THROWS_WITH(parseTaskMix("passkey:0.7,kv-lines:0.5"), Catch::Contains("more than 1"));
  CHECK_THROWS_WITH(parseTaskMix("passkey:0.1,passkey:0.2"), Catch::Contains("twice"));
  CHECK_THROWS_WITH(parseTaskMix("needle:0.1"), Catch::Contains("unknown retrieval task"));
  TaskMix ruler = parseTaskMix("variable-tracking:0.2,niah-multikey:0.3,passkey:0.1");
  CHECK(ruler[RetrievalTask::NiahMultikey] == 0.3);
  CHECK(taskMixSpec(ruler) == "passkey:0.1,niah-multikey:0.3,variable-tracking:0.2");

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
    Tokenizer tokenizer = Tokenizer::fromFile(file);
    RetrievalPromptBuilder builder(tokenizerPhraseEncoder(tokenizer), {});
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

namespace {

// A prompt cut into what its generator should have put there: the filler tokens outside the
// pieces that start with `head` words (needles, assignments), each piece `pieceLength` words long.
struct Pieces {
  std::vector<int64_t> starts;  // token index of each piece
  std::vector<int32_t> filler;  // every other token between the instruction and the question
};

Pieces cutPieces(const Vocabulary& v, const std::vector<int32_t>& t, int64_t from, int64_t to, const std::string& head,
                 const std::function<int64_t(int64_t)>& pieceLength) {
  auto headWords = int64_t(std::count(head.begin(), head.end(), ' ') + 1);
  Pieces out;
  for (int64_t i = from; i < to;) {
    if (i + headWords <= to && wordsOf(v, t, i, headWords) == head) {
      out.starts.push_back(i);
      i += pieceLength(i);
    } else {
      out.filler.push_back(t[size_t(i)]);
      ++i;
    }
  }
  return out;
}

// The first n tokens of the repeat filler cycle.
std::vector<int32_t> fillerCycle(const Vocabulary& v, int64_t n) {
  std::istringstream in(
      "the grass is green . the sky is blue . the sun is yellow . here we go . there and back again .");
  std::vector<int32_t> cycle, out;
  for (std::string w; in >> w;) cycle.push_back(v.id(w));
  for (int64_t i = 0; i < n; ++i) out.push_back(cycle[size_t(i) % cycle.size()]);
  return out;
}

}  // namespace

TEST_CASE(
    "niah prompts (RULER multikey, multivalue, multiquery): counted lengths, distinct keys, the asked needle "
    "where the depth says") {
  Vocabulary v = promptVocabulary();
  RetrievalPromptBuilder builder(wordPhraseEncoder(v), {});
  // Counted by hand: the instruction 14 words; a needle "one of the special magic numbers for K K is : d d d d d ."
  // 17; the singular question "what is the special magic number for K K ?" 10 and "the special magic number for
  // K K is" 8; the plural "what are all the special magic numbers for Q ?" 9 + |Q| and "the special magic numbers
  // for Q are" 6 + |Q|, with |Q| = 2 for one key and "K K , K K , K K , and K K" = 12 for four.
  CHECK(builder.minimumLength(RetrievalTask::NiahMultikey) == 14 + 4 * 17 + 10 + 8 + 5);
  CHECK(builder.minimumLength(RetrievalTask::NiahMultivalue) == 14 + 4 * 17 + 11 + 8 + 4 * 5);
  CHECK(builder.minimumLength(RetrievalTask::NiahMultiquery) == 14 + 4 * 17 + 21 + 18 + 4 * 5);
  const std::string needleHead = "one of the special magic numbers for";
  for (RetrievalTask task : {RetrievalTask::NiahMultikey, RetrievalTask::NiahMultivalue, RetrievalTask::NiahMultiquery})
    for (int64_t length : {141, 300})
      for (double depth : {0.0, 0.3, 1.0})
        for (int64_t trial = 0; trial < 4; ++trial) {
          INFO(retrievalTaskName(task) << " length " << length << " depth " << depth << " trial " << trial);
          RetrievalPrompt p = builder.build({task, Filler::Repeat, 11, length, depth, trial});
          REQUIRE(int64_t(p.tokens.size()) == length);
          CHECK(p.answerItemTokens == 5);
          bool one = task == RetrievalTask::NiahMultikey;
          CHECK(wordsOf(v, p.tokens, 0, 14) ==
                (one ? "a special magic number is hidden within the following text . remember it ."
                     : "some special magic numbers are hidden within the following text . remember them ."));
          int64_t questionAt = -1;
          for (int64_t i = 14; i + 2 < length; ++i)
            if (v.word(p.tokens[size_t(i)]) == "what") questionAt = i;
          REQUIRE(questionAt > 0);
          Pieces pieces = cutPieces(v, p.tokens, 14, questionAt, needleHead, [](int64_t) { return 17; });
          REQUIRE(pieces.starts.size() == 4);
          int64_t F = length - builder.minimumLength(task);
          CHECK(pieces.filler == fillerCycle(v, F));  // the cycle runs on across the needles
          std::vector<std::string> keys, values;
          for (int64_t at : pieces.starts) {
            CHECK(wordsOf(v, p.tokens, at + 9, 2) == "is :");
            CHECK(v.word(p.tokens[size_t(at + 16)]) == ".");
            keys.push_back(wordsOf(v, p.tokens, at + 7, 2));
            values.push_back(wordsOf(v, p.tokens, at + 11, 5));
            for (int64_t i = 0; i < 5; ++i) CHECK(isDigitWord(v.word(p.tokens[size_t(at + 11 + i)])));
          }
          std::set<std::string> distinct(keys.begin(), keys.end());
          CHECK(distinct.size() == (task == RetrievalTask::NiahMultivalue ? 1u : 4u));
          // The anchor: a needle of an asked key, after round(depth * F) filler tokens.
          auto anchor = std::find(pieces.starts.begin(), pieces.starts.end(), p.needleBegin);
          REQUIRE(anchor != pieces.starts.end());
          auto needlesBefore = anchor - pieces.starts.begin();
          CHECK(p.needleBegin - 14 - 17 * needlesBefore == std::llround(depth * double(F)));
          std::string answer = wordsOf(v, p.tokens, p.answerBegin, p.answerLength());
          std::string tail = wordsOf(v, p.tokens, questionAt, p.answerBegin - questionAt);
          if (task == RetrievalTask::NiahMultikey) {
            std::string asked = keys[size_t(needlesBefore)];
            CHECK(tail ==
                  "what is the special magic number for " + asked + " ? the special magic number for " + asked + " is");
            CHECK(answer == values[size_t(needlesBefore)]);
          } else if (task == RetrievalTask::NiahMultivalue) {
            CHECK(tail == "what are all the special magic numbers for " + keys[0] +
                              " ? the special magic numbers for " + keys[0] + " are");
            CHECK(answer == values[0] + " " + values[1] + " " + values[2] + " " + values[3]);  // as they appear
          } else {
            // "what are all ... for K1 , K2 , K3 , and K4 ?": every key, each value in the order asked.
            std::string query = wordsOf(v, p.tokens, questionAt + 8, 12);
            CHECK(tail == "what are all the special magic numbers for " + query + " ? the special magic numbers for " +
                              query + " are");
            std::string expected;
            for (int64_t q = 0; q < 4; ++q) {
              std::string key = wordsOf(v, p.tokens, questionAt + 8 + 3 * q + (q == 3 ? 1 : 0), 2);
              auto at = std::find(keys.begin(), keys.end(), key);
              REQUIRE(at != keys.end());
              expected += (q ? " " : "") + values[size_t(at - keys.begin())];
              if (q == 0) CHECK(at - keys.begin() == needlesBefore);  // the anchor is the first asked key's
            }
            CHECK(wordsOf(v, p.tokens, questionAt + 8 + 8, 2) == ", and");
            CHECK(answer == expected);
          }
        }
  CHECK_THROWS_WITH(builder.build({RetrievalTask::NiahMultiquery, Filler::Repeat, 1, 140, 0.5, 0}),
                    Catch::Contains("at least 141 tokens"));
}

TEST_CASE("variable-tracking prompt (RULER vt): one chain of four hops, the names bound to the value asked") {
  Vocabulary v = promptVocabulary();
  RetrievalPromptBuilder builder(wordPhraseEncoder(v), {});
  // "remember and track the chain of variable assignment hidden in the following text ." 14, "variable N = d d d d
  // d ." 9, four "variable N = variable N ." 6 each, "question : find all variables that are assigned the value" 10 + 5
  // digits,
  // ". answer : they are" 5, five names.
  CHECK(builder.minimumLength(RetrievalTask::VariableTracking) == 14 + 9 + 4 * 6 + 10 + 5 + 5 + 5);
  for (int64_t length : {72, 128, 400})
    for (double depth : {0.0, 0.5, 1.0})
      for (int64_t trial = 0; trial < 4; ++trial) {
        INFO("length " << length << " depth " << depth << " trial " << trial);
        RetrievalPrompt p = builder.build({RetrievalTask::VariableTracking, Filler::Repeat, 3, length, depth, trial});
        REQUIRE(int64_t(p.tokens.size()) == length);
        CHECK(p.answerItemTokens == 1);
        REQUIRE(p.answerLength() == 5);
        int64_t questionAt = length - 5 - 5 - 5 - 10;
        CHECK(wordsOf(v, p.tokens, questionAt, 10) == "question : find all variables that are assigned the value");
        std::string value = wordsOf(v, p.tokens, questionAt + 10, 5);
        CHECK(wordsOf(v, p.tokens, questionAt + 15, 5) == ". answer : they are");
        Pieces pieces = cutPieces(v, p.tokens, 14, questionAt, "variable",
                                  [&](int64_t at) { return isDigitWord(v.word(p.tokens[size_t(at + 3)])) ? 9 : 6; });
        REQUIRE(pieces.starts.size() == 5);
        int64_t F = length - 72;
        CHECK(pieces.filler == fillerCycle(v, F));
        // The chain in order: variable N0 = value . then variable Nh = variable N(h-1) .
        CHECK(p.needleBegin == pieces.starts[0]);
        CHECK(p.needleBegin - 14 == std::llround(depth * double(F)));
        CHECK(wordsOf(v, p.tokens, pieces.starts[0] + 2, 7) == "= " + value + " .");
        std::vector<std::string> names{v.word(p.tokens[size_t(pieces.starts[0] + 1)])};
        for (size_t h = 1; h < 5; ++h) {
          int64_t at = pieces.starts[h];
          CHECK(wordsOf(v, p.tokens, at + 2, 2) == "= variable");
          CHECK(v.word(p.tokens[size_t(at + 4)]) == names.back());
          names.push_back(v.word(p.tokens[size_t(at + 1)]));
        }
        CHECK(std::set<std::string>(names.begin(), names.end()).size() == 5);
        std::string expected;
        for (const auto& n : names) expected += (expected.empty() ? "" : " ") + n;
        CHECK(wordsOf(v, p.tokens, p.answerBegin, 5) == expected);
      }
}

TEST_CASE("task mix: every task trains at the length it fits, and a length it does not fit is refused") {
  Vocabulary v = promptVocabulary();
  RetrievalPromptBuilder builder(wordPhraseEncoder(v), {});
  TaskMix mix = parseTaskMix("niah-multikey:0.5,variable-tracking:0.5");
  checkTaskMixFits(mix, builder, 128);
  CHECK_THROWS_WITH(
      checkTaskMixFits(mix, builder, 100),
      Catch::Contains(
          "--task-mix niah-multikey: its prompts need at least 105 tokens; the training sequences have 100"));
  CHECK_THROWS_WITH(checkTaskMixFits(parseTaskMix("passkey:0.001"), builder, 32), Catch::Contains("at least 67"));
  int counts[kRetrievalTasks] = {};
  for (int row = 0; row < 400; ++row) {
    auto p = taskSequence(mix, Filler::Repeat, builder, 4, row / 16, row % 16, 128);
    REQUIRE(p.has_value());
    CHECK(p->tokens.size() == 128);
    counts[v.word(p->tokens[0]) == "a" ? 2 : 5] += 1;
  }
  CHECK(counts[2] + counts[5] == 400);
  CHECK(std::abs(counts[2] - 200) < 4 * std::sqrt(400 * 0.25));
}

TEST_CASE("RULER-style prompts in BPE vocabularies read back as their words") {
  for (const char* file :
       {"tests/tokenizer/gpt-neox-20b_tokenizer.json", "tests/tokenizer/sentencepiece-bpe_tokenizer.json"}) {
    INFO(file);
    Tokenizer tokenizer = Tokenizer::fromFile(file);
    RetrievalPromptBuilder builder(tokenizerPhraseEncoder(tokenizer), {});
    for (RetrievalTask task : {RetrievalTask::NiahMultikey, RetrievalTask::NiahMultivalue,
                               RetrievalTask::NiahMultiquery, RetrievalTask::VariableTracking}) {
      INFO(retrievalTaskName(task));
      RetrievalPrompt p = builder.build({task, Filler::Repeat, 2, 600, 0.5, 1});
      REQUIRE(p.tokens.size() == 600);
      std::string text = tokenizer.decode(p.tokens);
      std::string answer = tokenizer.decode({p.tokens.begin() + p.answerBegin, p.tokens.end()});
      CHECK(text.find(task == RetrievalTask::VariableTracking ? "they are" : "special magic") != std::string::npos);
      CHECK(text.substr(text.size() - answer.size()) == answer);
      CHECK(p.answerLength() % p.answerItemTokens == 0);
    }
  }
}

TEST_CASE(
    "native prompts: Landmark's passkey and LongEval's lines, as long as fits, the asked line where the "
    "depth says") {
  for (const char* file :
       {"tests/tokenizer/gpt-neox-20b_tokenizer.json", "tests/tokenizer/sentencepiece-bpe_tokenizer.json"}) {
    INFO(file);
    Tokenizer tokenizer = Tokenizer::fromFile(file);
    const std::string garbage =
        "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again.";
    for (double depth : {0.0, 0.4, 1.0}) {
      INFO("depth " << depth);
      NativePrompt p = buildNativePrompt(tokenizer, {RetrievalTask::Passkey, Filler::Repeat, 3, 400, depth, 1});
      REQUIRE(p.tokens.size() <= 400);
      CHECK(p.tokens.size() >= 400 - 12);  // one more character of garbage would not fit
      CHECK(!p.lastInteger);
      int key = std::stoi(p.answer);
      CHECK((key >= 1 && key <= 50000));
      std::string text = tokenizer.decode(p.tokens);
      std::string task =
          "There is an important info hidden inside a lot of irrelevant text. Find it and memorize them. I will quiz "
          "you about the important information there.\n";
      size_t at = text.find(task);
      REQUIRE(at != std::string::npos);
      std::string information = "\nThe pass key is " + p.answer + ". Remember it. " + p.answer + " is the pass key.\n";
      size_t info = text.find(information);
      REQUIRE(info != std::string::npos);
      std::string prefix = text.substr(at + task.size(), info - at - task.size());
      std::string suffix = text.substr(info + information.size());
      const std::string question = "\nWhat is the pass key? The pass key is";
      REQUIRE(suffix.size() >= question.size());
      CHECK(suffix.substr(suffix.size() - question.size()) == question);
      suffix.erase(suffix.size() - question.size());
      // Both cut from the start of the repeated garbage, the prefix round(depth x n) of n characters.
      std::string repeated;
      while (repeated.size() < 4000) repeated += (repeated.empty() ? "" : " ") + garbage;
      CHECK(repeated.compare(0, prefix.size(), prefix) == 0);
      CHECK(repeated.compare(0, suffix.size(), suffix) == 0);
      auto n = double(prefix.size() + suffix.size());
      CHECK(std::abs(double(prefix.size()) - depth * n) <= 0.5);
      CHECK(p.needleBegin > 0);
      CHECK(tokenizer.decode({p.tokens.begin() + p.needleBegin, p.tokens.end()}).find("The pass key is " + p.answer) !=
            std::string::npos);
    }
    for (double depth : {0.0, 0.5, 1.0}) {
      INFO("lines, depth " << depth);
      NativePrompt p = buildNativePrompt(tokenizer, {RetrievalTask::KvLines, Filler::Repeat, 3, 700, depth, 2});
      REQUIRE(p.tokens.size() <= 700);
      CHECK(p.lastInteger);
      std::string text = tokenizer.decode(p.tokens);
      std::istringstream lines(text);
      std::vector<std::pair<std::string, std::string>> record;  // (name, value)
      std::set<std::string> names;
      for (std::string line; std::getline(lines, line);) {
        if (line.rfind("line ", 0) != 0) continue;
        size_t colon = line.find(": REGISTER_CONTENT is <");
        REQUIRE(colon != std::string::npos);
        CHECK(line.back() == '>');
        std::string name = line.substr(5, colon - 5);
        CHECK(name.find('-') != std::string::npos);
        names.insert(name);
        record.emplace_back(name, line.substr(colon + 23, line.size() - colon - 24));
      }
      REQUIRE(record.size() >= 2);
      CHECK(names.size() == record.size());
      auto asked = size_t(std::llround(depth * double(record.size() - 1)));
      std::string tail = "\nNow the record is over. Tell me what is the <REGISTER_CONTENT> in line " +
                         record[asked].first + "? I need the number.Line <" + record[asked].first +
                         ">: <REGISTER_CONTENT> is";
      REQUIRE(text.size() > tail.size());
      CHECK(text.substr(text.size() - tail.size()) == tail);
      CHECK(p.answer == record[asked].second);
      CHECK(text.rfind("Below is a record of lines I want you to remember.", 20) != std::string::npos);
    }
  }
  Tokenizer tokenizer = Tokenizer::fromFile("tests/tokenizer/gpt-neox-20b_tokenizer.json");
  CHECK_THROWS_WITH(buildNativePrompt(tokenizer, {RetrievalTask::NiahMultikey, Filler::Repeat, 1, 400, 0.5, 0}),
                    Catch::Contains("--format words"));
  CHECK_THROWS_WITH(buildNativePrompt(tokenizer, {RetrievalTask::Passkey, Filler::Repeat, 1, 20, 0.5, 0}),
                    Catch::Contains("needs at least"));
}

TEST_CASE("answers read from generated text: Landmark's first integer, LongEval's last, RULER's items") {
  CHECK(integerIn(" 4213. Remember it", false) == "4213");
  CHECK(integerIn("line 7 is <4213>", true) == "4213");
  CHECK(integerIn("line 7 is <4213>", false) == "7");
  CHECK(integerIn("no number", false).empty());
  CHECK(integerIn("is <00420>", false) == "420");
  CHECK(integerIn("00", true) == "0");
  CHECK(itemsFound("The Numbers are 4 0 9 1 7 and 1 2", {"4 0 9 1 7", "1 2 3"}) == 1);
  CHECK(itemsFound("RIVER city", {"river", "City"}) == 2);
}

TEST_CASE("documents of a text: WikiText's top-level headings, in whatever pieces the tokens cut them") {
  // Tokens as a tokenizer cuts text: a heading's "=" inside a token with the spaces before it, a
  // section heading ("= = Sub = =") inside an article, a title spread over tokens.
  std::vector<std::string> pieces{" \n",    " = ", "Al",    "pha",  " = \n", "text", "\n", " = = Sub = = \n",
                                  "more\n", " =",  " Beta", " Two", " =",    "\n",   "x"};
  auto docs = headingDocuments(pieces);
  REQUIRE(docs.size() == 3);
  CHECK(docs[0].firstToken == 0);
  CHECK(docs[0].title.empty());
  CHECK(docs[1].firstToken == 1);
  CHECK(docs[1].title == "Alpha");
  CHECK(docs[2].firstToken == 9);
  CHECK(docs[2].title == "Beta Two");
  std::vector<int64_t> starts{0, 1, 9};
  CHECK(documentOf(starts, 0) == 0);
  CHECK(documentOf(starts, 8) == 1);
  CHECK(documentOf(starts, 14) == 2);
  CHECK(headingDocuments({"no headings\n", "at all"}).size() == 1);
  CHECK(headingDocuments({}).empty());
}
