#pragma once
// Synthetic retrieval prompts in a model's own vocabulary: does a model *use* what lies far back
// in its context? Each prompt is a token sequence of an exact length whose last tokens are the
// answer; it is a function of (task, filler, seed, length, depth, trial) alone. Values and keys
// are kPasskeyDigits digit words ("4 0 9 1 7", each one or two tokens) and two-word keys
// "ADJ NOUN" (41 x 37 pairs).
//
//  passkey (the Landmark / position-interpolation format, WikiText-tokenized):
//    there is an important information hidden inside a lot of irrelevant text . find it and
//    remember it . i will quiz you about the important information there .
//    <filler before> the pass key is K . remember it . K is the pass key . <filler after>
//    what is the pass key ? the pass key is K
//  The needle starts `depth` of the way through the filler: filler before = round(depth * F) of
//  the F filler tokens. Filler::Repeat cycles "the grass is green . the sky is blue . the sun is
//  yellow . here we go . there and back again ." (RULER's "noise" haystack; the cycle continues
//  across needles); Filler::Natural is F consecutive tokens of a text (an evaluation split) from
//  an offset drawn per prompt (RULER's "essay" haystack).
//
//  kv-lines (LongEval "lines", WikiText-tokenized):
//    line ADJ NOUN : value is V .      (N lines, distinct keys)
//    what is the value in line ADJ NOUN ? the value is V
//  The asked line is line round(depth * (N - 1)) of the N that fit; the other lines are
//  distractors. Tokens left over by the whole lines (fewer than a line's) pad the prompt's front
//  with the filler cycle, so the length is exact.
//
//  niah-multikey, niah-multivalue, niah-multiquery (RULER scripts/data/synthetic/niah.py with
//  the settings of scripts/synthetic.yaml: 4 keys 1 value 1 query; 1 key 4 values; 4 keys all
//  queried), the template of scripts/data/synthetic/constants.py in words:
//    some special magic numbers are hidden within the following text . remember them .
//    <filler with the needles> what are all the special magic numbers for Q ? the special magic
//    numbers for Q are V1 V2 ...
//  a needle being RULER's "one of the special magic numbers for K is : V ." and Q the asked keys
//  joined as RULER joins them ("K1 , K2 , K3 , and K4"). One value asked (multikey) takes
//  RULER's singular ("a special magic number is hidden ... remember it .", "what is the special
//  magic number for K ? the special magic number for K is V"). The first needle of the first asked
//  key (the anchor) starts after round(depth * F) filler tokens; every other needle at a uniformly
//  drawn filler offset (RULER: random sentence positions). Answers: multivalue's values in the
//  order they appear, multiquery's in the order asked.
//
//  variable-tracking (RULER scripts/data/synthetic/variable_tracking.py, 1 chain of 4 hops):
//    remember and track the chain of variable assignment hidden in the following text .
//    <filler with: variable N0 = V . / variable N1 = variable N0 . / ... / variable N4 = variable N3 . >
//    question : find all variables that are assigned the value V . answer : they are N0 N1 N2 N3 N4
//  N0..N4 distinct one-token names (RULER: five random capitals); the first assignment starts
//  after round(depth * F) filler tokens, the four hops at sorted uniform offsets after it.
//
// Differences from RULER forced by a word vocabulary and short training lengths: lower-case words
// with spaced punctuation; "remember" for "memorize" and "variable" for "VAR" (WikiText has neither); 5 digit words
// for RULER's 7-digit numbers; RULER's clause "mentioned in the provided text", its second
// instruction sentence and its answer preamble dropped so that multikey and variable-tracking fit
// a 128-token training length (multikey needs 105 tokens, variable-tracking 72).
//
// The answer is always the prompt's last answerLength tokens, answerItems() items of
// answerItemTokens each: a decoder predicts them teacher-forced from the tokens before; an
// encoder sees them replaced by <mask>.
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "data/token_span.h"
#include "data/tokenizer.h"
#include "data/vocabulary.h"

namespace xtrap {

// In this order in --task-mix's draw (data/task_mix.h): a new task goes last.
enum class RetrievalTask { Passkey, KvLines, NiahMultikey, NiahMultivalue, NiahMultiquery, VariableTracking };
enum class Filler { Repeat, Natural };
constexpr int kRetrievalTasks = 6;

RetrievalTask parseRetrievalTask(const std::string& name);  // throws listing every task
std::string retrievalTaskName(RetrievalTask task);
std::string retrievalTaskNames();     // "passkey, kv-lines, ...": for help and errors
bool usesFiller(RetrievalTask task);  // every task but kv-lines (whose distractor lines fill it)
// The words keys are made of: an adjective and a noun (space-separated lists, 41 and 37 words).
std::string_view retrievalKeyAdjectives();
std::string_view retrievalKeyNouns();
Filler parseFiller(const std::string& name);  // throws listing repeat, natural
std::string fillerName(Filler filler);

constexpr int64_t kPasskeyDigits = 5;
// Bumped whenever a prompt's tokens change, so cached retrieval results of older prompts are not reused.
constexpr int kRetrievalPromptVersion = 1;

struct RetrievalPrompt {
  std::vector<int32_t> tokens;   // exactly the requested length
  int64_t needleBegin = 0;       // the first token of the needle the depth places (passkey's; kv-lines' asked
                                 // line; niah's anchor; variable-tracking's first assignment)
  int64_t answerBegin = 0;       // the answer: tokens [answerBegin, tokens.size())
  int64_t answerItemTokens = 0;  // the answer is items of this many tokens (a value's; a name's)
  int64_t answerLength() const { return int64_t(tokens.size()) - answerBegin; }
  int64_t answerItems() const { return answerLength() / answerItemTokens; }
};

// What one prompt is made from.
struct PromptRequest {
  RetrievalTask task = RetrievalTask::Passkey;
  Filler filler = Filler::Repeat;  // every task but kv-lines
  uint64_t seed = 1;
  int64_t length = 0;  // tokens of the prompt, answer included
  double depth = 0;    // in [0, 1]
  int64_t trial = 0;
};

// Turns a phrase of space-separated words into token ids; throws naming a word it cannot encode.
using PhraseEncoder = std::function<std::vector<int32_t>(std::string_view phrase)>;
// Word-level vocabularies (WikiText): one id per word; a word the vocabulary lacks (or maps to
// <unk>) is an error naming it.
PhraseEncoder wordPhraseEncoder(const Vocabulary& vocab);
// BPE (pretrained models): the phrase as running text after a word (every word with the space
// before it, as mid-sentence), the word's tokens dropped. The digits " 0" .. " 9" are single
// tokens in BLOOM's and GPT-NeoX's vocabularies, so a key "4 0 9 1 7" is five tokens; Llama's,
// Qwen's and Gemma's write each as the space and the digit, ten tokens, all of them the answer.
// A tokenizer whose digit words differ in length is refused by the builder, naming the digit.
PhraseEncoder tokenizerPhraseEncoder(const Tokenizer& tokenizer);

class RetrievalPromptBuilder {
 public:
  // naturalFiller: the text Filler::Natural draws from (may be empty when it is not used).
  RetrievalPromptBuilder(const PhraseEncoder& encode, TokenSpan naturalFiller);

  RetrievalPrompt build(const PromptRequest& request) const;
  // The shortest prompt of a task (no filler; kv-lines: two lines). Throws naming a word the
  // vocabulary lacks for the task.
  int64_t minimumLength(RetrievalTask task) const;

 private:
  // A needle-in-a-haystack layout: the filler (F tokens) with pieces inserted at filler offsets.
  struct Insert {
    int64_t offset = 0;  // filler tokens before it
    std::vector<int32_t> tokens;
    bool anchor = false;  // the needle whose start is the prompt's needleBegin
  };
  RetrievalPrompt passkey(const PromptRequest& r) const;
  RetrievalPrompt kvLines(const PromptRequest& r) const;
  RetrievalPrompt niah(const PromptRequest& r) const;
  RetrievalPrompt variableTracking(const PromptRequest& r) const;
  void appendFillerCycle(std::vector<int32_t>& out, int64_t count, int64_t& cursor) const;
  std::vector<int32_t> fillerTokens(const PromptRequest& r, std::mt19937_64& rng, int64_t count) const;
  // head + the filler with `inserts` (stable-sorted by offset) + tail; sets needleBegin.
  RetrievalPrompt haystack(const std::vector<int32_t>& head, const std::vector<int32_t>& filler,
                           std::vector<Insert> inserts, const std::vector<int32_t>& tail) const;
  std::vector<int32_t> randomValue(std::mt19937_64& rng) const;
  std::vector<std::vector<int32_t>> distinctKeys(std::mt19937_64& rng, int64_t count, int64_t length) const;
  void requireWords(RetrievalTask task) const;

  TokenSpan natural_;
  std::string missing_[kRetrievalTasks];  // why a task's words cannot be encoded ("" = they can)
  std::vector<int32_t> instruction_, fillerCycle_, needleHead_, needleMiddle_, needleTail_, passkeyQuestion_;
  std::vector<std::vector<int32_t>> digits_;  // the ids of the digit words "0" .. "9", each as many
  int64_t keyTokens() const { return kPasskeyDigits * int64_t(digits_.front().size()); }  // a key's or value's tokens
  std::vector<int32_t> lineWord_, colonValueIs_, lineEnd_, kvQuestionHead_, kvQuestionTail_;
  std::vector<int32_t> keyAdjectives_, keyNouns_;
  // niah: the singular ("One") and plural ("Many") instruction, question and answer heads.
  std::vector<int32_t> niahInstructionOne_, niahInstructionMany_, niahNeedleHead_, niahNeedleIs_, niahQuestionOne_,
      niahQuestionMany_, niahAnswerOne_, niahAnswerMany_, comma_, andWord_, isWord_, areWord_, questionMark_;
  // variable-tracking
  std::vector<int32_t> vtInstruction_, vtVar_, vtEquals_, vtQuestion_, vtAnswerHead_, vtNames_;
};

}  // namespace xtrap
