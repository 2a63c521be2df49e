#pragma once
// The normalizer of a tokenizer.json, applied to each stretch of text between added tokens before
// pre-tokenization: a sequence of NFC (unicode_nfc.h), Prepend (a string put before non-empty
// text: SentencePiece's "▁" in Llama 2's file), Replace (every match of a pattern replaced by
// a string: " " by "▁") and BertNormalizer (bert_text.h), as Hugging Face tokenizers'
// normalizers of those names.
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "data/bert_text.h"
#include "data/unicode_regex.h"

namespace xtrap {

class Normalizer {
 public:
  void addNfc();
  void addPrepend(std::string prefix);
  // `regex`'s matches, left to right, become `content` (literal text).
  void addReplace(std::shared_ptr<const UnicodeRegex> regex, const std::string& content);
  void addBert(const BertNormalizerSettings& settings);

  // `text` (valid UTF-8) through every step in order.
  std::string apply(std::string_view text) const;

 private:
  struct Step {
    enum Kind { Nfc, Prepend, Replace, Bert } kind;
    std::string text;  // Prepend's prefix, or Replace's content in PCRE2's substitution syntax
    std::shared_ptr<const UnicodeRegex> regex;
    BertNormalizerSettings bert;
  };
  std::vector<Step> steps_;
};

}  // namespace xtrap
