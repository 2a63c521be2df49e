#pragma once
// The binary token cache `.xtrap-cache.bin` next to a WikiText directory's files: magic,
// version, the source files' stamp, the vocabulary and the three id streams. The reader trusts
// nothing: any mismatch or damage makes it return false and the caller re-parses the text.
#include <cstdint>
#include <istream>
#include <ostream>
#include <vector>

#include "data/wikitext.h"

namespace xtrap {

void writeTokenCache(std::ostream& out, const std::vector<int64_t>& stamp, const Corpus& corpus);
// Fills corpus.vocab/train/valid/test; false (corpus unspecified) if the cache is not valid for `stamp`.
bool readTokenCache(std::istream& in, const std::vector<int64_t>& stamp, Corpus& corpus);

}  // namespace xtrap
