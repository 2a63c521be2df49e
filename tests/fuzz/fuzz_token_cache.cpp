// libFuzzer: the `.xtrap-cache.bin` reader. Damaged bytes must make it report a problem without
// crashing or allocating more than the input justifies; what it accepts must round-trip.
#include <cstdint>
#include <cstdlib>
#include <sstream>
#include <string>

#include "data/token_cache.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const xtrap::SourceStamp stamp;  // zero sizes and content hash
  std::string bytes(reinterpret_cast<const char*>(data), size);
  xtrap::Corpus corpus;
  if (!xtrap::readTokenCache(bytes, stamp, xtrap::payloadOf(bytes), corpus).empty()) return 0;
  std::ostringstream out;
  xtrap::writeTokenCache(out, stamp, corpus);
  std::string again = out.str();
  xtrap::Corpus back;
  if (!xtrap::readTokenCache(again, stamp, xtrap::payloadOf(again), back).empty()) std::abort();
  if (back.vocab.words() != corpus.vocab.words() || back.train != corpus.train || back.valid != corpus.valid ||
      back.test != corpus.test || back.digest != corpus.digest)
    std::abort();
  return 0;
}
