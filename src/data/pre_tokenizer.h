#pragma once
// The pre-tokenizers of a byte-level BPE tokenizer.json, applied in order to each stretch of
// normalized text between added tokens: Split (a regular expression, its delimiter behaviour,
// optionally inverted) and ByteLevel (an optional prefix space, optionally GPT-2's splitting
// regex, then every byte as its alphabet character). Semantics follow Hugging Face tokenizers'
// NormalizedString::split and the ByteLevel pre-tokenizer; pieces that come out empty are dropped.
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "data/unicode_regex.h"

namespace xtrap {

// What a Split does with a match ("delimiter"), as tokenizers' SplitDelimiterBehavior.
enum class SplitBehavior { Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous };

class PreTokenizer {
 public:
  void addSplit(std::shared_ptr<const UnicodeRegex> regex, SplitBehavior behavior, bool invert);
  void addByteLevel(bool addPrefixSpace, bool useRegex);

  // Appends the pieces of `text` that the model tokenizes.
  void apply(std::string_view text, std::vector<std::string>& pieces) const;

 private:
  struct Step {
    bool byteLevel = false;
    bool addPrefixSpace = false;
    std::shared_ptr<const UnicodeRegex> regex;  // Split's, or GPT-2's for ByteLevel (null without)
    SplitBehavior behavior = SplitBehavior::Isolated;
    bool invert = false;
  };
  std::vector<Step> steps_;
};

}  // namespace xtrap
