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

template <typename... Pieces>
void appendAll(std::vector<int32_t>& out, const Pieces&... pieces) {
  (append(out, pieces), ...);
}

// The generator of one prompt: every choice it makes follows from the request alone.
std::mt19937_64 promptGenerator(const PromptRequest& r) {
  std::string key = fmt::format("{}|{}|{}|{}|{:.9f}|{}", retrievalTaskName(r.task), fillerName(r.filler), r.seed,
                                r.length, r.depth, r.trial);
  return std::mt19937_64(fnv1a64(key));
}

int64_t uniformBelow(std::mt19937_64& rng, int64_t n) { return std::uniform_int_distribution<int64_t>(0, n - 1)(rng); }

}  // namespace

constexpr const char* kTaskNames[kRetrievalTasks] = {"passkey",         "kv-lines",        "niah-multikey",
                                                     "niah-multivalue", "niah-multiquery", "variable-tracking"};

RetrievalTask parseRetrievalTask(const std::string& name) {
  for (int t = 0; t < kRetrievalTasks; ++t)
    if (name == kTaskNames[t]) return RetrievalTask(t);
  throw std::invalid_argument("unknown retrieval task '" + name + "' (valid: " + retrievalTaskNames() + ")");
}

std::string retrievalTaskName(RetrievalTask task) { return kTaskNames[int(task)]; }

std::string retrievalTaskNames() {
  std::string names;
  for (int t = 0; t < kRetrievalTasks; ++t) names += std::string(t ? ", " : "") + kTaskNames[t];
  return names;
}

bool usesFiller(RetrievalTask task) { return task != RetrievalTask::KvLines; }

std::string_view retrievalKeyAdjectives() { return kKeyAdjectives; }
std::string_view retrievalKeyNouns() { return kKeyNouns; }

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

PhraseEncoder tokenizerPhraseEncoder(const Tokenizer& tokenizer) {
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

namespace {

// RULER's settings (scripts/synthetic.yaml): keys, values per key, keys asked.
struct NiahCounts {
  int64_t keys, values, queries;
  bool singular() const { return values * queries == 1; }
};

NiahCounts niahCounts(RetrievalTask task) {
  if (task == RetrievalTask::NiahMultikey) return {4, 1, 1};
  if (task == RetrievalTask::NiahMultivalue) return {1, 4, 1};
  return {4, 1, 4};  // niah-multiquery: num_needle_k = max(k, q)
}

constexpr int64_t kTrackingHops = 4;  // RULER's vt: one chain of 4 hops, 5 names

}  // namespace

RetrievalPromptBuilder::RetrievalPromptBuilder(const PhraseEncoder& encode, TokenSpan naturalFiller)
    : natural_(naturalFiller) {
  // Each task's words are encoded here; a vocabulary that lacks one fails that task only, when
  // it is asked for (a passkey-only run needs no "magic").
  auto tryTasks = [&](std::initializer_list<RetrievalTask> tasks, const std::function<void()>& encodeWords) {
    try {
      encodeWords();
    } catch (const std::exception& e) {
      for (RetrievalTask t : tasks)
        if (missing_[int(t)].empty()) missing_[int(t)] = e.what();
    }
  };
  std::initializer_list<RetrievalTask> all = {RetrievalTask::Passkey,        RetrievalTask::KvLines,
                                              RetrievalTask::NiahMultikey,   RetrievalTask::NiahMultivalue,
                                              RetrievalTask::NiahMultiquery, RetrievalTask::VariableTracking};
  tryTasks(all, [&] {
    fillerCycle_ = encode(kFillerCycle);
    lineEnd_ = encode(".");
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
  });
  // The words of a list that are one token each (all of them in a word vocabulary; a BPE
  // vocabulary drops those it splits).
  auto singleTokens = [&](std::string_view words, const char* what, size_t minimum) {
    std::vector<int32_t> ids;
    std::istringstream in{std::string(words)};
    for (std::string w; in >> w;)
      if (auto id = encode(w); id.size() == 1) ids.push_back(id[0]);
    if (ids.size() < minimum)
      throw std::runtime_error(fmt::format("{} need at least {} one-token words of their list", what, minimum));
    return ids;
  };
  tryTasks({RetrievalTask::Passkey}, [&] {
    instruction_ = encode(kInstruction);
    needleHead_ = encode("the pass key is");
    needleMiddle_ = encode(". remember it .");
    needleTail_ = encode("is the pass key .");
    passkeyQuestion_ = encode("what is the pass key ? the pass key is");
  });
  // Keys are two tokens: an adjective and a noun.
  tryTasks({RetrievalTask::KvLines, RetrievalTask::NiahMultikey, RetrievalTask::NiahMultivalue,
            RetrievalTask::NiahMultiquery},
           [&] {
             keyAdjectives_ = singleTokens(kKeyAdjectives, "retrieval keys", 2);
             keyNouns_ = singleTokens(kKeyNouns, "retrieval keys", 2);
           });
  tryTasks({RetrievalTask::KvLines}, [&] {
    lineWord_ = encode("line");
    colonValueIs_ = encode(": value is");
    kvQuestionHead_ = encode("what is the value in line");
    kvQuestionTail_ = encode("? the value is");
  });
  tryTasks({RetrievalTask::NiahMultikey, RetrievalTask::NiahMultivalue, RetrievalTask::NiahMultiquery}, [&] {
    niahInstructionOne_ = encode("a special magic number is hidden within the following text . remember it .");
    niahInstructionMany_ = encode("some special magic numbers are hidden within the following text . remember them .");
    niahNeedleHead_ = encode("one of the special magic numbers for");
    niahNeedleIs_ = encode("is :");
    niahQuestionOne_ = encode("what is the special magic number for");
    niahQuestionMany_ = encode("what are all the special magic numbers for");
    niahAnswerOne_ = encode("the special magic number for");
    niahAnswerMany_ = encode("the special magic numbers for");
    comma_ = encode(",");
    andWord_ = encode("and");
    isWord_ = encode("is");
    areWord_ = encode("are");
    questionMark_ = encode("?");
  });
  tryTasks({RetrievalTask::VariableTracking}, [&] {
    vtInstruction_ = encode("remember and track the chain of variable assignment hidden in the following text .");
    vtVar_ = encode("variable");  // RULER's "VAR"; WikiText has no "var"
    vtEquals_ = encode("=");
    vtQuestion_ = encode("question : find all variables that are assigned the value");
    vtAnswerHead_ = encode(". answer : they are");
    vtNames_ = singleTokens(kKeyNouns, "variable names", size_t(kTrackingHops + 1));
  });
}

void RetrievalPromptBuilder::requireWords(RetrievalTask task) const {
  if (!missing_[int(task)].empty())
    throw std::runtime_error(fmt::format("{} prompts: {}", retrievalTaskName(task), missing_[int(task)]));
}

int64_t RetrievalPromptBuilder::minimumLength(RetrievalTask task) const {
  requireWords(task);
  auto n = [](const std::vector<int32_t>& v) { return int64_t(v.size()); };
  if (task == RetrievalTask::Passkey)
    return n(instruction_) + n(needleHead_) + n(needleMiddle_) + n(needleTail_) + n(passkeyQuestion_) + 3 * keyTokens();
  if (task == RetrievalTask::KvLines) {
    int64_t line = n(lineWord_) + 2 + n(colonValueIs_) + keyTokens() + n(lineEnd_);
    return 2 * line + n(kvQuestionHead_) + 2 + n(kvQuestionTail_) + keyTokens();
  }
  if (task == RetrievalTask::VariableTracking) {
    int64_t first = n(vtVar_) + 1 + n(vtEquals_) + keyTokens() + n(lineEnd_);
    int64_t hop = 2 * n(vtVar_) + 2 + n(vtEquals_) + n(lineEnd_);
    return n(vtInstruction_) + first + kTrackingHops * hop + n(vtQuestion_) + keyTokens() + n(vtAnswerHead_) +
           kTrackingHops + 1;
  }
  NiahCounts c = niahCounts(task);
  int64_t needle = n(niahNeedleHead_) + 2 + n(niahNeedleIs_) + keyTokens() + n(lineEnd_);
  int64_t query = 2 * c.queries + (c.queries > 1 ? (c.queries - 1) * n(comma_) + n(andWord_) : 0);
  bool one = c.singular();
  return n(one ? niahInstructionOne_ : niahInstructionMany_) + c.keys * c.values * needle +
         n(one ? niahQuestionOne_ : niahQuestionMany_) + query + n(questionMark_) +
         n(one ? niahAnswerOne_ : niahAnswerMany_) + query + n(one ? isWord_ : areWord_) +
         c.queries * c.values * keyTokens();
}

RetrievalPrompt RetrievalPromptBuilder::build(const PromptRequest& r) const {
  if (!(r.depth >= 0 && r.depth <= 1)) throw std::invalid_argument("retrieval depth must be in [0, 1]");
  int64_t minimum = minimumLength(r.task);
  if (r.length < minimum)
    throw std::invalid_argument(
        fmt::format("a {} prompt needs at least {} tokens; {} asked", retrievalTaskName(r.task), minimum, r.length));
  RetrievalPrompt p;
  switch (r.task) {
    case RetrievalTask::Passkey:
      p = passkey(r);
      break;
    case RetrievalTask::KvLines:
      p = kvLines(r);
      break;
    case RetrievalTask::VariableTracking:
      p = variableTracking(r);
      break;
    default:
      p = niah(r);
  }
  if (int64_t(p.tokens.size()) != r.length) throw std::logic_error("retrieval prompt of the wrong length");
  return p;
}

void RetrievalPromptBuilder::appendFillerCycle(std::vector<int32_t>& out, int64_t count, int64_t& cursor) const {
  auto cycle = int64_t(fillerCycle_.size());
  for (int64_t i = 0; i < count; ++i, ++cursor) out.push_back(fillerCycle_[size_t(cursor % cycle)]);
}

std::vector<int32_t> RetrievalPromptBuilder::fillerTokens(const PromptRequest& r, std::mt19937_64& rng,
                                                          int64_t count) const {
  std::vector<int32_t> filler;
  if (r.filler == Filler::Natural) {
    if (int64_t(natural_.size()) < count)
      throw std::invalid_argument(fmt::format("natural filler of {} tokens needs a text at least that long; it has {}",
                                              count, natural_.size()));
    int64_t offset = uniformBelow(rng, int64_t(natural_.size()) - count + 1);
    filler.assign(natural_.begin() + offset, natural_.begin() + offset + count);
  } else {
    int64_t cursor = 0;
    appendFillerCycle(filler, count, cursor);
  }
  return filler;
}

std::vector<int32_t> RetrievalPromptBuilder::randomValue(std::mt19937_64& rng) const {
  std::vector<int32_t> value;
  for (int64_t i = 0; i < kPasskeyDigits; ++i) append(value, digits_[size_t(uniformBelow(rng, 10))]);
  return value;
}

std::vector<std::vector<int32_t>> RetrievalPromptBuilder::distinctKeys(std::mt19937_64& rng, int64_t count,
                                                                       int64_t length) const {
  auto nouns = int64_t(keyNouns_.size());
  auto keySpace = int64_t(keyAdjectives_.size()) * nouns;
  if (count > keySpace)
    throw std::invalid_argument(
        fmt::format("a prompt of length {} needs {} distinct keys; there are {}", length, count, keySpace));
  // The first `count` of a partial Fisher-Yates shuffle of the key space.
  std::vector<int64_t> order(static_cast<size_t>(keySpace));
  for (int64_t k = 0; k < keySpace; ++k) order[size_t(k)] = k;
  for (int64_t i = 0; i < count; ++i) std::swap(order[size_t(i)], order[size_t(i + uniformBelow(rng, keySpace - i))]);
  std::vector<std::vector<int32_t>> keys;
  for (int64_t i = 0; i < count; ++i)
    keys.push_back({keyAdjectives_[size_t(order[size_t(i)] / nouns)], keyNouns_[size_t(order[size_t(i)] % nouns)]});
  return keys;
}

RetrievalPrompt RetrievalPromptBuilder::haystack(const std::vector<int32_t>& head, const std::vector<int32_t>& filler,
                                                 std::vector<Insert> inserts, const std::vector<int32_t>& tail) const {
  std::stable_sort(inserts.begin(), inserts.end(),
                   [](const Insert& a, const Insert& b) { return a.offset < b.offset; });
  RetrievalPrompt p;
  auto& t = p.tokens;
  append(t, head);
  int64_t used = 0;
  for (const Insert& piece : inserts) {
    t.insert(t.end(), filler.begin() + used, filler.begin() + piece.offset);
    used = piece.offset;
    if (piece.anchor) p.needleBegin = int64_t(t.size());
    append(t, piece.tokens);
  }
  t.insert(t.end(), filler.begin() + used, filler.end());
  append(t, tail);
  return p;
}

RetrievalPrompt RetrievalPromptBuilder::passkey(const PromptRequest& r) const {
  std::mt19937_64 rng = promptGenerator(r);
  std::vector<int32_t> key = randomValue(rng);
  int64_t F = r.length - minimumLength(RetrievalTask::Passkey);
  std::vector<int32_t> filler = fillerTokens(r, rng, F);
  Insert needle{std::llround(r.depth * double(F)), needleHead_, true};
  appendAll(needle.tokens, key, needleMiddle_, key, needleTail_);
  RetrievalPrompt p = haystack(instruction_, filler, {needle}, passkeyQuestion_);
  p.answerBegin = int64_t(p.tokens.size());
  append(p.tokens, key);
  p.answerItemTokens = keyTokens();
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
  std::vector<std::vector<int32_t>> keys = distinctKeys(rng, lines, r.length);
  std::vector<std::vector<int32_t>> values;
  for (int64_t line = 0; line < lines; ++line) values.push_back(randomValue(rng));
  auto asked = static_cast<int64_t>(std::llround(r.depth * double(lines - 1)));

  RetrievalPrompt p;
  auto& t = p.tokens;
  t.reserve(size_t(r.length));
  int64_t cursor = 0;
  appendFillerCycle(t, r.length - questionTokens - lines * lineTokens, cursor);
  for (int64_t line = 0; line < lines; ++line) {
    if (line == asked) p.needleBegin = int64_t(t.size());
    append(t, lineWord_);
    append(t, keys[size_t(line)]);
    append(t, colonValueIs_);
    append(t, values[size_t(line)]);
    append(t, lineEnd_);
  }
  append(t, kvQuestionHead_);
  append(t, keys[size_t(asked)]);
  append(t, kvQuestionTail_);
  p.answerBegin = int64_t(t.size());
  append(t, values[size_t(asked)]);
  p.answerItemTokens = keyTokens();
  return p;
}

RetrievalPrompt RetrievalPromptBuilder::niah(const PromptRequest& r) const {
  std::mt19937_64 rng = promptGenerator(r);
  NiahCounts c = niahCounts(r.task);
  std::vector<std::vector<int32_t>> keys = distinctKeys(rng, c.keys, r.length);
  std::vector<std::vector<std::vector<int32_t>>> values(static_cast<size_t>(c.keys));  // [key][value]
  for (auto& perKey : values)
    for (int64_t v = 0; v < c.values; ++v) perKey.push_back(randomValue(rng));
  // The keys asked: RULER's random.sample(range(k), q), the first q of a shuffle.
  std::vector<int64_t> asked(static_cast<size_t>(c.keys));
  for (int64_t k = 0; k < c.keys; ++k) asked[size_t(k)] = k;
  for (int64_t i = 0; i < c.queries; ++i) std::swap(asked[size_t(i)], asked[size_t(i + uniformBelow(rng, c.keys - i))]);
  asked.resize(size_t(c.queries));

  int64_t F = r.length - minimumLength(r.task);
  std::vector<int32_t> filler = fillerTokens(r, rng, F);
  std::vector<Insert> needles;
  std::vector<std::pair<int64_t, int64_t>> owner;  // (key, value) of each needle
  for (int64_t k = 0; k < c.keys; ++k)
    for (int64_t v = 0; v < c.values; ++v) {
      bool anchor = k == asked[0] && v == 0;
      Insert needle{anchor ? std::llround(r.depth * double(F)) : uniformBelow(rng, F + 1), niahNeedleHead_, anchor};
      appendAll(needle.tokens, keys[size_t(k)], niahNeedleIs_, values[size_t(k)][size_t(v)], lineEnd_);
      needles.push_back(std::move(needle));
      owner.emplace_back(k, v);
    }
  // Where needles share an offset their order is drawn too (a Fisher-Yates shuffle before the
  // stable sort by offset).
  std::vector<size_t> order(needles.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  for (size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[size_t(uniformBelow(rng, int64_t(i)))]);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return needles[a].offset < needles[b].offset; });
  std::vector<Insert> placed;
  for (size_t i : order) placed.push_back(needles[i]);

  bool one = c.singular();
  std::vector<int32_t> query;  // "K1 , K2 , K3 , and K4"
  for (size_t q = 0; q < asked.size(); ++q) {
    if (q > 0) append(query, comma_);
    if (q > 0 && q + 1 == asked.size()) append(query, andWord_);
    append(query, keys[size_t(asked[q])]);
  }
  std::vector<int32_t> tail = one ? niahQuestionOne_ : niahQuestionMany_;
  appendAll(tail, query, questionMark_, one ? niahAnswerOne_ : niahAnswerMany_, query, one ? isWord_ : areWord_);
  RetrievalPrompt p = haystack(one ? niahInstructionOne_ : niahInstructionMany_, filler, placed, tail);
  p.answerBegin = int64_t(p.tokens.size());
  // Each asked key's values in the order its needles appear; the keys in the order asked.
  for (int64_t key : asked)
    for (size_t i : order)
      if (owner[i].first == key) append(p.tokens, values[size_t(key)][size_t(owner[i].second)]);
  p.answerItemTokens = keyTokens();
  return p;
}

RetrievalPrompt RetrievalPromptBuilder::variableTracking(const PromptRequest& r) const {
  std::mt19937_64 rng = promptGenerator(r);
  auto pool = int64_t(vtNames_.size());
  std::vector<int32_t> names = vtNames_;  // the first hops + 1 of a partial shuffle
  for (int64_t i = 0; i <= kTrackingHops; ++i)
    std::swap(names[size_t(i)], names[size_t(i + uniformBelow(rng, pool - i))]);
  names.resize(size_t(kTrackingHops + 1));
  std::vector<int32_t> value = randomValue(rng);

  int64_t F = r.length - minimumLength(RetrievalTask::VariableTracking);
  std::vector<int32_t> filler = fillerTokens(r, rng, F);
  std::vector<Insert> chain;
  Insert first{std::llround(r.depth * double(F)), vtVar_, true};  // var N0 = V .
  first.tokens.push_back(names[0]);
  appendAll(first.tokens, vtEquals_, value, lineEnd_);
  chain.push_back(first);
  std::vector<int64_t> hopOffsets;  // sorted uniform offsets at or after the first assignment's
  for (int64_t h = 0; h < kTrackingHops; ++h)
    hopOffsets.push_back(first.offset + uniformBelow(rng, F - first.offset + 1));
  std::sort(hopOffsets.begin(), hopOffsets.end());
  for (int64_t h = 1; h <= kTrackingHops; ++h) {  // var Nh = var N(h-1) .
    Insert hop{hopOffsets[size_t(h - 1)], vtVar_, false};
    hop.tokens.push_back(names[size_t(h)]);
    appendAll(hop.tokens, vtEquals_, vtVar_);
    hop.tokens.push_back(names[size_t(h - 1)]);
    append(hop.tokens, lineEnd_);
    chain.push_back(std::move(hop));
  }
  std::vector<int32_t> tail = vtQuestion_;
  appendAll(tail, value, vtAnswerHead_);
  RetrievalPrompt p = haystack(vtInstruction_, filler, chain, tail);
  p.answerBegin = int64_t(p.tokens.size());
  append(p.tokens, names);
  p.answerItemTokens = 1;
  return p;
}

}  // namespace xtrap
