#pragma once
// The binary token cache `.xtrap-cache.bin` next to a WikiText directory's files, laid out so
// that it can be memory-mapped and used in place (little-endian, as written by this machine):
//   104-byte header  magic "XTRAPTOK", format version, the source files' stamp (sizes and content
//                    hash), the corpus digest, the payload checksum, word count, size of the
//                    vocabulary block and the three split lengths
//   payload          the words, each followed by '\0'; zero padding to a multiple of 4 bytes;
//                    then the train, valid and test ids as int32
// The reader trusts nothing: any mismatch or damage is reported and the caller re-parses the text.
#include <array>
#include <cstdint>
#include <functional>
#include <ostream>
#include <string>
#include <string_view>

#include "data/wikitext.h"

namespace xtrap {

constexpr size_t kTokenCacheHeaderBytes = 104;

// What a cache is valid for: the three split files (train, valid, test), by content, so that a
// copy on another machine keeps its cache and an edit that keeps size and mtime does not.
struct SourceStamp {
  std::array<uint64_t, 3> bytes{};
  uint64_t contentHash = 0;  // fnv1a64 over the three files' bytes in order
};

// Serialises the corpus's vocabulary, splits and digest, stamped with the text it came from.
void writeTokenCache(std::ostream& out, const SourceStamp& stamp, const Corpus& corpus);

// Reads the payload (the bytes after the header) in order, block by block.
using PayloadReader = std::function<void(const std::function<void(std::string_view)>& onBlock)>;

// Checks a cache's bytes against the sources' `stamp`. The payload, read through `payload` (a
// mapped file's pread, so checking touches no mapped page), must match the checksum and hold only
// ids of the vocabulary. On success fills corpus.vocab, digest and splits (views into `bytes`)
// and returns ""; otherwise returns why the cache cannot be used ("made from other data",
// "damaged: ...").
std::string readTokenCache(std::string_view bytes, const SourceStamp& stamp, const PayloadReader& payload,
                           Corpus& corpus);

// The PayloadReader of bytes already in memory (tests, the fuzzer).
PayloadReader payloadOf(std::string_view bytes);

}  // namespace xtrap
