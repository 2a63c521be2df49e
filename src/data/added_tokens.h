#pragma once
// The added tokens of a tokenizer.json (special tokens among them), found in text before it is
// pre-tokenized, as tokenizers' AddedVocabulary finds them: leftmost-longest, non-overlapping
// matches of the tokens' contents; a single_word token only where no word character touches it;
// lstrip and rstrip widen a match over the whitespace beside it.
#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "data/unicode_regex.h"

namespace xtrap {

struct AddedToken {
  std::string content;
  int32_t id = 0;
  bool special = false;
  bool singleWord = false;
  bool lstrip = false;
  bool rstrip = false;
  bool normalized = true;  // matched in the normalized text (by its normalized form) rather than the raw text
};

// A stretch of text: an added token's (id >= 0) or text to pre-tokenize (id -1).
struct TextSegment {
  size_t begin, end;
  int32_t id;
};

class AddedTokenMatcher {
 public:
  struct Pattern {
    std::string text;  // what is matched: the content, or its normalized form
    AddedToken token;
  };
  explicit AddedTokenMatcher(std::vector<Pattern> patterns);

  // The segments of `text` in order, covering it (empty text: no segment).
  std::vector<TextSegment> split(std::string_view text) const;

 private:
  std::vector<Pattern> patterns_;
  std::array<std::vector<size_t>, 256> byFirstByte_;  // indices into patterns_, longest first
  std::unique_ptr<UnicodeRegex> startsWithWord_, endsWithWord_, leadingSpace_, trailingSpace_;
};

}  // namespace xtrap
