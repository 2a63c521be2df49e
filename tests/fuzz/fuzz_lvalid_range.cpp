// libFuzzer: --Lvalid parser. Arbitrary text must either throw std::invalid_argument or give a
// sorted, duplicate-free list of lengths in 1..kMaxLvalid.
#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "eval/lvalid_range.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string spec(reinterpret_cast<const char*>(data), size);
  std::vector<int64_t> lengths;
  try {
    lengths = xtrap::parseLvalidRange(spec);
  } catch (const std::invalid_argument&) {
    return 0;
  }
  if (lengths.empty()) std::abort();
  for (size_t i = 0; i < lengths.size(); ++i) {
    if (lengths[i] < 1 || lengths[i] > xtrap::kMaxLvalid) std::abort();
    if (i > 0 && lengths[i] <= lengths[i - 1]) std::abort();
  }
  return 0;
}
