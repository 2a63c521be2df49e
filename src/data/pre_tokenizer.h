#pragma once
// The pre-tokenizers of a byte-level BPE tokenizer.json, applied in order to each stretch of
// normalized text between added tokens: Split (a regular expression, its delimiter behaviour,
// optionally inverted) and ByteLevel (an optional prefix space, optionally GPT-2's splitting
// regex, then every byte as its alphabet character) and Metaspace (SentencePiece's: spaces become
// a replacement character, "▁", which is put first in the text too where the prepend scheme
// says, and each piece then starts at one, unless `split` is off) and BertPreTokenizer (whitespace and
// punctuation, bert_text.h). Semantics follow Hugging Face tokenizers' NormalizedString::split and the
// ByteLevel pre-tokenizer; pieces that come out empty are dropped.
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "data/unicode_regex.h"

namespace xtrap {

// What a Split does with a match ("delimiter"), as tokenizers' SplitDelimiterBehavior.
enum class SplitBehavior { Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous };

// Where Metaspace puts its replacement before a text that does not start with it: always, only
// before the text's first piece (at the start of the input, not after an added token), or never.
enum class PrependScheme { Always, First, Never };

class PreTokenizer {
 public:
  void addSplit(std::shared_ptr<const UnicodeRegex> regex, SplitBehavior behavior, bool invert);
  void addByteLevel(bool addPrefixSpace, bool useRegex);
  void addMetaspace(std::string replacement, PrependScheme prepend, bool split);
  void addBert();  // BertPreTokenizer (bert_text.h)

  // Appends the pieces of `text` that the model tokenizes; `atInputStart`: `text` begins the
  // input (Metaspace's "first" scheme).
  void apply(std::string_view text, bool atInputStart, std::vector<std::string>& pieces) const;

 private:
  struct Step {
    enum Kind { Split, ByteLevel, Metaspace, Bert } kind = Split;
    bool addPrefixSpace = false;
    std::shared_ptr<const UnicodeRegex> regex;  // Split's, or GPT-2's for ByteLevel (null without)
    std::string replacement;                    // Metaspace's
    PrependScheme prepend = PrependScheme::Always;
    bool metaspaceSplit = true;
    SplitBehavior behavior = SplitBehavior::Isolated;
    bool invert = false;
  };
  std::vector<Step> steps_;
};

}  // namespace xtrap
