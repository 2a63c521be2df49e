// libFuzzer: the `.xtrap-cache.bin` reader. Damaged bytes must make it return false without
// crashing or allocating more than the input justifies; what it accepts must round-trip.
#include <cstdint>
#include <cstdlib>
#include <sstream>
#include <string>

#include "data/token_cache.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::vector<int64_t> stamp(6, 0);  // the seeds in tests/fuzz/token_cache use this stamp
  std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
  xtrap::Corpus corpus;
  if (!xtrap::readTokenCache(in, stamp, corpus)) return 0;
  std::ostringstream out;
  xtrap::writeTokenCache(out, stamp, corpus);
  std::istringstream again(out.str());
  xtrap::Corpus back;
  if (!xtrap::readTokenCache(again, stamp, back)) std::abort();
  if (back.vocab.words() != corpus.vocab.words() || back.train != corpus.train || back.valid != corpus.valid ||
      back.test != corpus.test)
    std::abort();
  return 0;
}
