#pragma once
// Synthetic retrieval prompts in a model's own vocabulary: does a model *use* what lies far back
// in its context? Each prompt is a token sequence of an exact length whose last tokens are the
// answer; it is a function of (task, filler, seed, length, depth, trial) alone.
//
//  passkey (the Landmark / position-interpolation format, WikiText-tokenized):
//    there is an important information hidden inside a lot of irrelevant text . find it and
//    remember it . i will quiz you about the important information there .
//    <filler before> the pass key is K . remember it . K is the pass key . <filler after>
//    what is the pass key ? the pass key is K
//  K: kPasskeyDigits digit words ("4 0 9 1 7", each one or two tokens). The needle starts `depth` of the way through
//  the filler: filler before = round(depth * F) of the F filler tokens. Filler::Repeat cycles "the grass is green . the
//  sky is blue . the sun is yellow . here we go . there and back again ." (the cycle continues across the needle);
//  Filler::Natural is F consecutive tokens of a text (an evaluation split) from an offset drawn per prompt.
//
//  kv-lines (LongEval "lines", WikiText-tokenized):
//    line ADJ NOUN : value is V .      (N lines, distinct keys, V kPasskeyDigits digit words)
//    what is the value in line ADJ NOUN ? the value is V
//  The asked line is line round(depth * (N - 1)) of the N that fit; the other lines are
//  distractors. Tokens left over by the whole lines (fewer than a line's) pad the prompt's front
//  with the filler cycle, so the length is exact.
//
// The answer is always the prompt's last answerLength tokens: a decoder predicts them teacher-
// forced from the tokens before; an encoder sees them replaced by <mask>.
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "data/bpe_tokenizer.h"
#include "data/token_span.h"
#include "data/vocabulary.h"

namespace xtrap {

enum class RetrievalTask { Passkey, KvLines };
enum class Filler { Repeat, Natural };

RetrievalTask parseRetrievalTask(const std::string& name);  // throws listing passkey, kv-lines
std::string retrievalTaskName(RetrievalTask task);
Filler parseFiller(const std::string& name);  // throws listing repeat, natural
std::string fillerName(Filler filler);

constexpr int64_t kPasskeyDigits = 5;
// Bumped whenever a prompt's tokens change, so cached retrieval results of older prompts are not reused.
constexpr int kRetrievalPromptVersion = 1;

struct RetrievalPrompt {
  std::vector<int32_t> tokens;  // exactly the requested length
  int64_t needleBegin = 0;      // passkey: the needle's first token; kv-lines: the asked line's first token
  int64_t answerBegin = 0;      // the answer: tokens [answerBegin, tokens.size())
  int64_t answerLength() const { return int64_t(tokens.size()) - answerBegin; }
};

// What one prompt is made from.
struct PromptRequest {
  RetrievalTask task = RetrievalTask::Passkey;
  Filler filler = Filler::Repeat;  // passkey only
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
PhraseEncoder bpePhraseEncoder(const BpeTokenizer& tokenizer);

class RetrievalPromptBuilder {
 public:
  // naturalFiller: the text Filler::Natural draws from (may be empty when it is not used).
  RetrievalPromptBuilder(const PhraseEncoder& encode, TokenSpan naturalFiller);

  RetrievalPrompt build(const PromptRequest& request) const;
  // The shortest prompt of a task (no filler; kv-lines: two lines).
  int64_t minimumLength(RetrievalTask task) const;

 private:
  RetrievalPrompt passkey(const PromptRequest& r) const;
  RetrievalPrompt kvLines(const PromptRequest& r) const;
  void appendFillerCycle(std::vector<int32_t>& out, int64_t count, int64_t& cursor) const;

  TokenSpan natural_;
  std::vector<int32_t> instruction_, fillerCycle_, needleHead_, needleMiddle_, needleTail_, passkeyQuestion_;
  std::vector<std::vector<int32_t>> digits_;  // the ids of the digit words "0" .. "9", each as many
  int64_t keyTokens() const { return kPasskeyDigits * int64_t(digits_.front().size()); }  // a key's or value's tokens
  std::vector<int32_t> lineWord_, colonValueIs_, lineEnd_, kvQuestionHead_, kvQuestionTail_;
  std::vector<int32_t> keyAdjectives_, keyNouns_;
};

}  // namespace xtrap
