#pragma once
// WikiText-format corpus: a directory with wiki.{train,valid,test}.tokens. Tokens are the
// whitespace-separated words of each line plus one <eos> per line (the usual LM convention:
// WikiText-2 train = 2,088,628 tokens). The vocabulary comes from the train split only.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "data/token_span.h"
#include "data/vocabulary.h"

namespace xtrap {

struct Corpus {
  std::filesystem::path dir;
  Vocabulary vocab;
  TokenSpan train, valid, test;  // views into `storage`
  std::string digest;            // corpusDigest() of the above (data/corpus_digest.h)
  // What the splits point into: the memory-mapped token cache, or ids the corpus owns. Shared, so
  // copies of a Corpus view the same memory.
  std::shared_ptr<const void> storage;
  // A corpus of a tokenizer's ids (data/tokenized_corpus.h): the id each split's first token is
  // predicted from (the tokenizer's bos, else its eos); -1 for WikiText's words, whose <eos> is.
  int32_t tokenizerContext = -1;

  // The id a split's first token is predicted from.
  int32_t contextToken() const { return tokenizerContext >= 0 ? tokenizerContext : vocab.eos(); }
  const TokenSpan& split(const std::string& name) const;  // "train"|"valid"|"test"
  // A corpus that owns its ids (tests; data directories where no cache can be written).
  static Corpus fromIds(Vocabulary vocab, std::vector<int32_t> train, std::vector<int32_t> valid,
                        std::vector<int32_t> test);
};

// Called with the bytes of a text done so far and the total, from one thread at a time.
using ParseProgress = std::function<void(size_t done, size_t total)>;

// Splits one file's text into words + <eos> per line, calling onWord for each token.
template <typename OnWord>
void forEachWikiTextToken(std::string_view text, OnWord&& onWord);

// Builds the vocabulary from `trainText` (descending frequency, ties by first appearance). Both
// functions split the text at line ends and use every hardware thread.
Vocabulary buildVocabulary(std::string_view trainText, const ParseProgress& progress = {});
std::vector<int32_t> tokenize(std::string_view text, const Vocabulary& vocab, const ParseProgress& progress = {});

// Loads a WikiText directory through the token cache `.xtrap-cache.bin` in it (token_cache.h):
// the splits are views of the memory-mapped cache, one copy in the page cache for every process
// that loads the same directory. Without a valid cache the text is parsed (progress on stderr for
// large files) and the cache written; a stale or damaged cache is rebuilt after a one-line
// notice. Concurrent loads of one directory (data-parallel ranks) parse it once: the others wait
// for the cache. An unwritable directory means no cache: the corpus then owns its ids. A missing,
// unreadable or empty split, invalid UTF-8 or a line over 1 MiB (text_checks.h) is a one-line
// error naming the file.
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
