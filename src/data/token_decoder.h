#pragma once
// The decoder of a tokenizer.json: the steps that turn the token strings of some ids back into
// text, each taking the list of strings the previous one gave, joined at the end, as Hugging Face
// tokenizers' decode_chain. ByteLevel (GPT-2's alphabet back to bytes, one string, invalid UTF-8
// repaired), Replace (a pattern's matches in each string), ByteFallback (runs of <0xHH> tokens
// as the bytes they name: one string when they form UTF-8, else one U+FFFD each), Fuse (all in
// one), SpaceJoin (all in one, single spaces between: a null decoder), Strip (up to `start`
// leading and `stop` trailing copies of a character off each string), Metaspace (its replacement
// character as a space, but dropped from the first string unless the prepend scheme is "never")
// and WordPiece (BERT's "##" continuations joined).
#include <memory>
#include <string>
#include <vector>

#include "data/unicode_regex.h"

namespace xtrap {

class TokenDecoder {
 public:
  void addByteLevel();
  void addReplace(std::shared_ptr<const UnicodeRegex> regex, const std::string& content);
  void addByteFallback();
  void addFuse();
  // What decode does without a decoder (null): the tokens joined by single spaces.
  void addSpaceJoin();
  void addStrip(char32_t character, size_t start, size_t stop);
  void addMetaspace(char32_t replacement, bool stripFirst);
  // WordPiece: every token but the first loses its continuation prefix, or gets a space before it;
  // `cleanup` then rejoins punctuation and contractions (" ." -> ".", " n't" -> "n't", ...).
  void addWordPiece(std::string prefix, bool cleanup);

  std::string decode(std::vector<std::string> tokens) const;

 private:
  struct Step {
    enum Kind { ByteLevel, Replace, ByteFallback, Fuse, SpaceJoin, Strip, Metaspace, WordPiece } kind;
    std::shared_ptr<const UnicodeRegex> regex;
    std::string content;   // Replace's, in PCRE2's substitution syntax; WordPiece's prefix
    char32_t character{};  // Strip's or Metaspace's
    size_t start = 0, stop = 0;
    bool stripFirst = false;
    bool cleanup = false;  // WordPiece's
  };
  std::vector<Step> steps_;
};

}  // namespace xtrap
