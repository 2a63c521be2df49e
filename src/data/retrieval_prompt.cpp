#include "data/retrieval_prompt.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <sstream>
#include <stdexcept>

#include "util/fnv1a64.h"

namespace xtrap {

namespace {

constexpr std::string_view kInstruction =
    "there is an important information hidden inside a lot of irrelevant text . find it and remember it . i will "
    "quiz you about the important information there .";
constexpr std::string_view kFillerCycle =
    "the grass is green . the sky is blue . the sun is yellow . here we go . there and back again .";
// Keys of kv-lines: an adjective and a noun, every pair distinct (41 x 37 = 1,517 keys).
constexpr std::string_view kKeyAdjectives =
    "red green blue black white old new small large great long high early late major young dark bright strong main "
    "local royal northern southern eastern western free final golden silver ancient modern quiet wild open hidden "
    "lost broken heavy light deep";
constexpr std::string_view kKeyNouns =
    "river city house army ship king road song film game church school island bridge tower station castle garden "
    "village forest lake mountain street market court temple hill valley field horse queen star stone wall gate door "
    "tree";

void append(std::vector<int32_t>& out, const std::vector<int32_t>& piece) {
  out.insert(out.end(), piece.begin(), piece.end());
}

// The generator of one prompt: every choice it makes follows from the request alone.
std::mt19937_64 promptGenerator(const PromptRequest& r) {
  std::string key = fmt::format("{}|{}|{}|{}|{:.9f}|{}", retrievalTaskName(r.task), fillerName(r.filler), r.seed,
                                r.length, r.depth, r.trial);
  return std::mt19937_64(fnv1a64(key));
}

int64_t uniformBelow(std::mt19937_64& rng, int64_t n) { return std::uniform_int_distribution<int64_t>(0, n - 1)(rng); }

}  // namespace

RetrievalTask parseRetrievalTask(const std::string& name) {
  if (name == "passkey") return RetrievalTask::Passkey;
  if (name == "kv-lines") return RetrievalTask::KvLines;
  throw std::invalid_argument("unknown retrieval task '" + name + "' (valid: passkey, kv-lines)");
}

std::string retrievalTaskName(RetrievalTask task) { return task == RetrievalTask::Passkey ? "passkey" : "kv-lines"; }

Filler parseFiller(const std::string& name) {
  if (name == "repeat") return Filler::Repeat;
  if (name == "natural") return Filler::Natural;
  throw std::invalid_argument("unknown filler '" + name + "' (valid: repeat, natural)");
}

std::string fillerName(Filler filler) { return filler == Filler::Repeat ? "repeat" : "natural"; }

PhraseEncoder wordPhraseEncoder(const Vocabulary& vocab) {
  return [&vocab](std::string_view phrase) {
    std::vector<int32_t> ids;
    std::istringstream words{std::string(phrase)};
    std::string word;
    while (words >> word) {
      int32_t id = vocab.id(word);
      if (!vocab.contains(word) || id == vocab.unk())
        throw std::runtime_error("retrieval prompts need the word '" + word + "', which the vocabulary lacks");
      ids.push_back(id);
    }
    return ids;
  };
}

PhraseEncoder bpePhraseEncoder(const BpeTokenizer& tokenizer) {
  return [&tokenizer](std::string_view phrase) {
    // After a word, then that word's tokens dropped: a byte-level tokenizer's leading space and a
    // SentencePiece-style one's prepended "▁" both fall on the first word, not on the phrase.
    auto anchor = tokenizer.encode("a");
    auto ids = tokenizer.encode("a " + std::string(phrase));
    if (ids.size() <= anchor.size() || !std::equal(anchor.begin(), anchor.end(), ids.begin()))
      throw std::runtime_error(fmt::format("the tokenizer does not encode '{}' apart from the word before it", phrase));
    return std::vector<int32_t>(ids.begin() + std::ptrdiff_t(anchor.size()), ids.end());
  };
}

RetrievalPromptBuilder::RetrievalPromptBuilder(const PhraseEncoder& encode, TokenSpan naturalFiller)
    : natural_(naturalFiller) {
  instruction_ = encode(kInstruction);
  fillerCycle_ = encode(kFillerCycle);
  needleHead_ = encode("the pass key is");
  needleMiddle_ = encode(". remember it .");
  needleTail_ = encode("is the pass key .");
  passkeyQuestion_ = encode("what is the pass key ? the pass key is");
  // A digit word is one token in a word vocabulary and BLOOM's (" 4"), two in Llama's and Qwen's
  // (the space, then "4"); every digit the same count, so prompts of one length line up.
  for (char d = '0'; d <= '9'; ++d) {
    digits_.push_back(encode(std::string(1, d)));
    if (digits_.back().size() != digits_.front().size())
      throw std::runtime_error(
          fmt::format("retrieval prompts need every digit word as the same number of tokens; "
                      "'0' is {}, '{}' is {}",
                      digits_.front().size(), d, digits_.back().size()));
  }
  lineWord_ = encode("line");
  colonValueIs_ = encode(": value is");
  lineEnd_ = encode(".");
  kvQuestionHead_ = encode("what is the value in line");
  kvQuestionTail_ = encode("? the value is");
  // Keys are two tokens: the words of the lists that are one token each (all of them in a word
  // vocabulary; a BPE vocabulary drops those it splits).
  auto singleTokens = [&](std::string_view words) {
    std::vector<int32_t> ids;
    std::istringstream in{std::string(words)};
    for (std::string w; in >> w;)
      if (auto id = encode(w); id.size() == 1) ids.push_back(id[0]);
    if (ids.size() < 2) throw std::runtime_error("kv-lines keys need at least two one-token words of each list");
    return ids;
  };
  keyAdjectives_ = singleTokens(kKeyAdjectives);
  keyNouns_ = singleTokens(kKeyNouns);
}

int64_t RetrievalPromptBuilder::minimumLength(RetrievalTask task) const {
  auto n = [](const std::vector<int32_t>& v) { return int64_t(v.size()); };
  if (task == RetrievalTask::Passkey)
    return n(instruction_) + n(needleHead_) + n(needleMiddle_) + n(needleTail_) + n(passkeyQuestion_) + 3 * keyTokens();
  int64_t line = n(lineWord_) + 2 + n(colonValueIs_) + keyTokens() + n(lineEnd_);
  return 2 * line + n(kvQuestionHead_) + 2 + n(kvQuestionTail_) + keyTokens();
}

RetrievalPrompt RetrievalPromptBuilder::build(const PromptRequest& r) const {
  if (!(r.depth >= 0 && r.depth <= 1)) throw std::invalid_argument("retrieval depth must be in [0, 1]");
  int64_t minimum = minimumLength(r.task);
  if (r.length < minimum)
    throw std::invalid_argument(
        fmt::format("a {} prompt needs at least {} tokens; {} asked", retrievalTaskName(r.task), minimum, r.length));
  RetrievalPrompt p = r.task == RetrievalTask::Passkey ? passkey(r) : kvLines(r);
  if (int64_t(p.tokens.size()) != r.length) throw std::logic_error("retrieval prompt of the wrong length");
  return p;
}

void RetrievalPromptBuilder::appendFillerCycle(std::vector<int32_t>& out, int64_t count, int64_t& cursor) const {
  auto cycle = int64_t(fillerCycle_.size());
  for (int64_t i = 0; i < count; ++i, ++cursor) out.push_back(fillerCycle_[size_t(cursor % cycle)]);
}

RetrievalPrompt RetrievalPromptBuilder::passkey(const PromptRequest& r) const {
  std::mt19937_64 rng = promptGenerator(r);
  std::vector<int32_t> key;
  for (int64_t i = 0; i < kPasskeyDigits; ++i) append(key, digits_[size_t(uniformBelow(rng, 10))]);
  int64_t fillerTokens = r.length - minimumLength(RetrievalTask::Passkey);
  auto before = static_cast<int64_t>(std::llround(r.depth * double(fillerTokens)));
  std::vector<int32_t> filler;  // all F filler tokens, cut at `before` around the needle
  if (r.filler == Filler::Natural) {
    if (int64_t(natural_.size()) < fillerTokens)
      throw std::invalid_argument(fmt::format("natural filler of {} tokens needs a text at least that long; it has {}",
                                              fillerTokens, natural_.size()));
    int64_t offset = uniformBelow(rng, int64_t(natural_.size()) - fillerTokens + 1);
    filler.assign(natural_.begin() + offset, natural_.begin() + offset + fillerTokens);
  } else {
    int64_t cursor = 0;
    appendFillerCycle(filler, fillerTokens, cursor);
  }
  RetrievalPrompt p;
  auto& t = p.tokens;
  t.reserve(size_t(r.length));
  append(t, instruction_);
  t.insert(t.end(), filler.begin(), filler.begin() + before);
  p.needleBegin = int64_t(t.size());
  append(t, needleHead_);
  append(t, key);
  append(t, needleMiddle_);
  append(t, key);
  append(t, needleTail_);
  t.insert(t.end(), filler.begin() + before, filler.end());
  append(t, passkeyQuestion_);
  p.answerBegin = int64_t(t.size());
  append(t, key);
  return p;
}

RetrievalPrompt RetrievalPromptBuilder::kvLines(const PromptRequest& r) const {
  std::mt19937_64 rng = promptGenerator(r);
  int64_t lineTokens =
      int64_t(lineWord_.size()) + 2 + int64_t(colonValueIs_.size()) + keyTokens() + int64_t(lineEnd_.size());
  int64_t questionTokens = int64_t(kvQuestionHead_.size()) + 2 + int64_t(kvQuestionTail_.size()) + keyTokens();
  int64_t lines = (r.length - questionTokens) / lineTokens;
  auto keySpace = int64_t(keyAdjectives_.size() * keyNouns_.size());
  if (lines > keySpace)
    throw std::invalid_argument(
        fmt::format("kv-lines at length {} needs {} distinct keys; it has {} (at most length {})", r.length, lines,
                    keySpace, keySpace * lineTokens + questionTokens));
  // N distinct keys: the first N of a partial Fisher-Yates shuffle of the key space.
  std::vector<int64_t> keys(static_cast<size_t>(keySpace));
  for (int64_t k = 0; k < keySpace; ++k) keys[size_t(k)] = k;
  for (int64_t i = 0; i < lines; ++i) std::swap(keys[size_t(i)], keys[size_t(i + uniformBelow(rng, keySpace - i))]);
  auto keyTokens = [&](int64_t line) {
    int64_t k = keys[size_t(line)];
    return std::vector<int32_t>{keyAdjectives_[size_t(k / int64_t(keyNouns_.size()))],
                                keyNouns_[size_t(k % int64_t(keyNouns_.size()))]};
  };
  std::vector<std::vector<int32_t>> values(static_cast<size_t>(lines));
  for (auto& v : values)
    for (int64_t i = 0; i < kPasskeyDigits; ++i) append(v, digits_[size_t(uniformBelow(rng, 10))]);
  auto asked = static_cast<int64_t>(std::llround(r.depth * double(lines - 1)));

  RetrievalPrompt p;
  auto& t = p.tokens;
  t.reserve(size_t(r.length));
  int64_t cursor = 0;
  appendFillerCycle(t, r.length - questionTokens - lines * lineTokens, cursor);
  for (int64_t line = 0; line < lines; ++line) {
    if (line == asked) p.needleBegin = int64_t(t.size());
    append(t, lineWord_);
    append(t, keyTokens(line));
    append(t, colonValueIs_);
    append(t, values[size_t(line)]);
    append(t, lineEnd_);
  }
  append(t, kvQuestionHead_);
  append(t, keyTokens(asked));
  append(t, kvQuestionTail_);
  p.answerBegin = int64_t(t.size());
  append(t, values[size_t(asked)]);
  return p;
}

}  // namespace xtrap
