#include "data/corpus_digest.h"

#include <fmt/format.h>

#include <string_view>

#include "util/fnv1a64.h"

namespace xtrap {

std::string corpusDigest(const Vocabulary& vocab, TokenSpan train, TokenSpan valid, TokenSpan test) {
  uint64_t h = kFnv1a64Basis;
  for (const auto& word : vocab.words()) h = fnv1a64(std::string_view("\0", 1), fnv1a64(word, h));
  for (TokenSpan split : {train, valid, test}) {
    uint64_t n = split.size();
    h = fnv1a64({reinterpret_cast<const char*>(split.data()), split.size() * sizeof(int32_t)},
                fnv1a64({reinterpret_cast<const char*>(&n), sizeof(n)}, h));
  }
  return fmt::format("fnv1a64:{:016x}", h);
}

}  // namespace xtrap
