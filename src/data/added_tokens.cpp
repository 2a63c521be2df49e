#include "data/added_tokens.h"

#include <algorithm>

namespace xtrap {

AddedTokenMatcher::AddedTokenMatcher(std::vector<Pattern> patterns) : patterns_(std::move(patterns)) {
  for (size_t i = 0; i < patterns_.size(); ++i)
    if (!patterns_[i].text.empty()) byFirstByte_[static_cast<unsigned char>(patterns_[i].text[0])].push_back(i);
  for (auto& bucket : byFirstByte_)
    std::stable_sort(bucket.begin(), bucket.end(),
                     [&](size_t a, size_t b) { return patterns_[a].text.size() > patterns_[b].text.size(); });
  // The word and space tests of tokenizers' AddedVocabulary, whose Rust regex \w is spelled out
  // here (PCRE2's leaves out marks and connector punctuation, and takes every number).
  const std::string word = R"([\p{Alphabetic}\p{M}\p{Nd}\p{Pc}\x{200C}\x{200D}])";
  startsWithWord_ = std::make_unique<UnicodeRegex>("^" + word);
  endsWithWord_ = std::make_unique<UnicodeRegex>(word + R"(\z)");
  leadingSpace_ = std::make_unique<UnicodeRegex>(R"(^\s*)");
  trailingSpace_ = std::make_unique<UnicodeRegex>(R"(\s*\z)");
}

std::vector<TextSegment> AddedTokenMatcher::split(std::string_view text) const {
  std::vector<TextSegment> segments;
  size_t done = 0;  // end of the last segment
  size_t at = 0;
  while (at < text.size()) {
    const Pattern* found = nullptr;
    for (size_t index : byFirstByte_[static_cast<unsigned char>(text[at])]) {
      const std::string& p = patterns_[index].text;
      if (text.compare(at, p.size(), p) == 0) {
        found = &patterns_[index];
        break;
      }
    }
    if (!found) {
      ++at;
      continue;
    }
    size_t start = at, stop = at + found->text.size();
    at = stop;  // the next match starts after this one, even where this one is discarded
    const AddedToken& token = found->token;
    if (token.singleWord) {
      const bool spaceBefore = start == 0 || !endsWithWord_->search(text.substr(0, start));
      const bool spaceAfter = stop == text.size() || !startsWithWord_->search(text.substr(stop));
      if (!spaceBefore || !spaceAfter) continue;
    }
    if (token.lstrip) start = std::max(trailingSpace_->findAll(text.substr(0, start)).front().first, done);
    if (token.rstrip) stop += leadingSpace_->findAll(text.substr(stop)).front().second;
    if (done < start) segments.push_back(TextSegment{done, start, -1});
    segments.push_back(TextSegment{start, stop, token.id});
    done = stop;
    at = std::max(at, stop);
  }
  if (done < text.size()) segments.push_back(TextSegment{done, text.size(), -1});
  return segments;
}

}  // namespace xtrap
