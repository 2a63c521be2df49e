#include "data/tokenized_corpus.h"

#include <stdexcept>

#include "data/text_tokens.h"

namespace xtrap {

Corpus loadTokenizedCorpus(const std::filesystem::path& dir, const Tokenizer& tokenizer, int32_t contextToken) {
  if (!std::filesystem::is_directory(dir)) throw std::runtime_error("data directory not found: " + dir.string());
  std::vector<int32_t> ids[3];
  const char* splits[3] = {"train", "valid", "test"};
  for (int s = 0; s < 3; ++s) {
    TextSource source = wikiTextSplitSource(dir, splits[s], tokenizer.wordLevel());
    ids[s] = tokenizeTextFile(source, tokenizer).ids;
    if (ids[s].empty()) throw std::runtime_error("empty split: " + source.file.string());
  }
  Corpus c = Corpus::fromIds(Vocabulary(), std::move(ids[0]), std::move(ids[1]), std::move(ids[2]));
  c.dir = dir;
  c.tokenizerContext = contextToken;
  return c;
}

}  // namespace xtrap
