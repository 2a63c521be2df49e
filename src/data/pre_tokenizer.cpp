#include "data/pre_tokenizer.h"

#include <algorithm>
#include <utility>

#include "data/bert_text.h"
#include "data/byte_level.h"

namespace xtrap {
namespace {

// GPT-2's pattern, as tokenizers' ByteLevel pre-tokenizer has it.
const char kGpt2Pattern[] = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

struct Span {
  size_t begin, end;
  bool isMatch;
};

// tokenizers' Pattern::find_matches: the matches and the stretches between them, in order.
std::vector<Span> matchesAndGaps(const UnicodeRegex& regex, std::string_view text) {
  std::vector<Span> spans;
  if (text.empty()) return {Span{0, 0, false}};
  size_t previous = 0;
  for (const auto& [start, end] : regex.findAll(text)) {
    if (previous != start) spans.push_back(Span{previous, start, false});
    spans.push_back(Span{start, end, true});
    previous = end;
  }
  if (previous != text.size()) spans.push_back(Span{previous, text.size(), false});
  return spans;
}

// NormalizedString::split: the pieces to keep under `behavior`, Removed dropping the matches.
// Returns whether the first piece appended starts where `text` does.
bool split(std::string_view text, const UnicodeRegex& regex, SplitBehavior behavior, bool invert,
           std::vector<std::string>& out) {
  std::vector<Span> spans = matchesAndGaps(regex, text);
  if (invert)
    for (Span& s : spans) s.isMatch = !s.isMatch;
  std::vector<std::pair<size_t, size_t>> kept;
  bool previousMatch = false;
  switch (behavior) {
    case SplitBehavior::Isolated:
      for (const Span& s : spans) kept.emplace_back(s.begin, s.end);
      break;
    case SplitBehavior::Removed:
      for (const Span& s : spans)
        if (!s.isMatch) kept.emplace_back(s.begin, s.end);
      break;
    case SplitBehavior::Contiguous:
      for (const Span& s : spans) {
        if (s.isMatch == previousMatch && !kept.empty())
          kept.back().second = s.end;
        else
          kept.emplace_back(s.begin, s.end);
        previousMatch = s.isMatch;
      }
      break;
    case SplitBehavior::MergedWithPrevious:
      for (const Span& s : spans) {
        if (s.isMatch && !previousMatch && !kept.empty())
          kept.back().second = s.end;
        else
          kept.emplace_back(s.begin, s.end);
        previousMatch = s.isMatch;
      }
      break;
    case SplitBehavior::MergedWithNext:
      for (auto s = spans.rbegin(); s != spans.rend(); ++s) {
        if (s->isMatch && !previousMatch && !kept.empty())
          kept.back().first = s->begin;
        else
          kept.emplace_back(s->begin, s->end);
        previousMatch = s->isMatch;
      }
      std::reverse(kept.begin(), kept.end());
      break;
  }
  bool firstAtStart = false, first = true;
  for (const auto& [begin, end] : kept) {
    if (end == begin) continue;
    if (first) firstAtStart = begin == 0;
    first = false;
    out.emplace_back(text.substr(begin, end - begin));
  }
  return firstAtStart;
}

// Metaspace on one piece: spaces replaced, the replacement prepended where `prepend`, split
// before each replacement (MergedWithNext) where `splitPieces`.
void metaspace(std::string piece, bool prepend, const std::string& replacement, bool splitPieces,
               std::vector<std::string>& out) {
  std::string replaced;
  for (char c : piece) c == ' ' ? replaced += replacement : replaced += c;
  if (prepend && replaced.compare(0, replacement.size(), replacement) != 0) replaced.insert(0, replacement);
  if (!splitPieces) {
    if (!replaced.empty()) out.push_back(std::move(replaced));
    return;
  }
  size_t begin = 0;
  for (size_t at = replaced.find(replacement, 1); at != std::string::npos; at = replaced.find(replacement, at + 1)) {
    out.push_back(replaced.substr(begin, at - begin));
    begin = at;
  }
  if (begin < replaced.size()) out.push_back(replaced.substr(begin));
}

}  // namespace

void PreTokenizer::addSplit(std::shared_ptr<const UnicodeRegex> regex, SplitBehavior behavior, bool invert) {
  Step step;
  step.kind = Step::Split;
  step.regex = std::move(regex);
  step.behavior = behavior;
  step.invert = invert;
  steps_.push_back(std::move(step));
}

void PreTokenizer::addByteLevel(bool addPrefixSpace, bool useRegex) {
  static const auto gpt2 = std::make_shared<const UnicodeRegex>(kGpt2Pattern);
  Step step;
  step.kind = Step::ByteLevel;
  step.addPrefixSpace = addPrefixSpace;
  if (useRegex) step.regex = gpt2;
  steps_.push_back(std::move(step));
}

void PreTokenizer::addBert() {
  Step step;
  step.kind = Step::Bert;
  steps_.push_back(std::move(step));
}

void PreTokenizer::addMetaspace(std::string replacement, PrependScheme prepend, bool split) {
  Step step;
  step.kind = Step::Metaspace;
  step.replacement = std::move(replacement);
  step.prepend = prepend;
  step.metaspaceSplit = split;
  steps_.push_back(std::move(step));
}

void PreTokenizer::apply(std::string_view text, bool atInputStart, std::vector<std::string>& pieces) const {
  if (text.empty()) return;
  std::vector<std::string> current{std::string(text)}, next;
  bool firstAtInputStart = atInputStart;  // current[0] begins the input
  for (const Step& step : steps_) {
    next.clear();
    for (size_t i = 0; i < current.size(); ++i) {
      std::string& piece = current[i];
      const bool pieceAtInputStart = i == 0 && firstAtInputStart;
      if (step.kind == Step::Split) {
        const bool firstAtPieceStart = split(piece, *step.regex, step.behavior, step.invert, next);
        if (i == 0) firstAtInputStart = pieceAtInputStart && firstAtPieceStart;
        continue;
      }
      if (step.kind == Step::Bert) {
        bertPreTokenize(piece, next);
        continue;
      }
      if (step.kind == Step::Metaspace) {
        const bool prepend =
            step.prepend == PrependScheme::Always || (step.prepend == PrependScheme::First && pieceAtInputStart);
        metaspace(std::move(piece), prepend, step.replacement, step.metaspaceSplit, next);
        continue;
      }
      if (step.addPrefixSpace && piece.front() != ' ') piece.insert(piece.begin(), ' ');
      std::vector<std::string> parts;
      if (step.regex)
        split(piece, *step.regex, SplitBehavior::Isolated, false, parts);
      else
        parts.push_back(std::move(piece));
      for (const std::string& part : parts) {
        std::string mapped;
        appendByteLevel(part, mapped);
        next.push_back(std::move(mapped));
      }
    }
    std::swap(current, next);
  }
  for (std::string& piece : current)
    if (!piece.empty()) pieces.push_back(std::move(piece));
}

}  // namespace xtrap
