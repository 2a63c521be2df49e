#pragma once
// WikiText-format corpus: a directory with wiki.{train,valid,test}.tokens. Tokens are the
// whitespace-separated words of each line plus one <eos> per line (the usual LM convention:
// WikiText-2 train = 2,088,628 tokens). The vocabulary comes from the train split only.
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "data/vocabulary.h"

namespace xtrap {

struct Corpus {
  std::filesystem::path dir;
  Vocabulary vocab;
  std::vector<int32_t> train, valid, test;

  const std::vector<int32_t>& split(const std::string& name) const;  // "train"|"valid"|"test"
};

// Splits one file's text into words + <eos> per line, calling onWord for each token.
template <typename OnWord>
void forEachWikiTextToken(std::string_view text, OnWord&& onWord);

// Builds the vocabulary from `trainText` (descending frequency, ties by first appearance).
Vocabulary buildVocabulary(std::string_view trainText);
std::vector<int32_t> tokenize(std::string_view text, const Vocabulary& vocab);

// Loads a WikiText directory. Uses (and refreshes) a binary cache `.xtrap-cache.bin` in the
// directory, keyed on the three files' sizes and mtimes, so the second load of WikiText-103-sized
// data skips parsing. An unwritable directory just means no cache. A missing, unreadable or empty
// split, invalid UTF-8 or a line over 1 MiB (text_checks.h) is a one-line error naming the file.
Corpus loadWikiText(const std::filesystem::path& dir);

// The directory xtrap uses when --data is not given: the shipped WikiText-2 copy.
std::filesystem::path defaultDataDir();

// ---- implementation of the template ----
template <typename OnWord>
void forEachWikiTextToken(std::string_view text, OnWord&& onWord) {
  size_t i = 0, n = text.size();
  while (i < n) {
    size_t lineEnd = text.find('\n', i);
    if (lineEnd == std::string_view::npos) lineEnd = n;
    size_t j = i;
    while (j < lineEnd) {
      while (j < lineEnd && (text[j] == ' ' || text[j] == '\t' || text[j] == '\r')) ++j;
      size_t start = j;
      while (j < lineEnd && text[j] != ' ' && text[j] != '\t' && text[j] != '\r') ++j;
      if (j > start) onWord(text.substr(start, j - start));
    }
    onWord(Vocabulary::kEos);
    i = lineEnd + 1;
  }
}

}  // namespace xtrap
