// libFuzzer: the safetensors header reader. Any input must either be rejected with
// std::runtime_error or yield tensors that lie inside the data, match their dtype and shape in
// bytes, and do not overlap.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string_view>
#include <vector>

#include "run/safetensors_reader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  try {
    auto tensors = xtrap::parseSafetensors(bytes, "fuzz.safetensors");
    uint64_t previousEnd = 0;
    std::vector<std::pair<uint64_t, uint64_t>> spans;
    for (const auto& [name, t] : tensors) {
      uint64_t count = 1;
      for (int64_t d : t.shape) count *= uint64_t(d);
      if (t.offset + t.bytes > size || t.offset < 8) std::abort();
      if (count * uint64_t(xtrap::safetensorsElementBytes(t.dtype)) != t.bytes) std::abort();
      spans.emplace_back(t.offset, t.offset + t.bytes);
    }
    std::sort(spans.begin(), spans.end());
    for (const auto& [begin, end] : spans) {
      if (begin < previousEnd) std::abort();
      previousEnd = end;
    }
  } catch (const std::runtime_error&) {
  }
  return 0;
}
