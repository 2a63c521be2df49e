// libFuzzer: the checkpoint container reader (magic, version, size, checksum). Any input must
// either be rejected with std::runtime_error or yield exactly the payload behind the header.
#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string_view>

#include "run/checkpoint_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  std::string_view payload;
  try {
    payload = xtrap::unframeCheckpoint(bytes, "fuzz.pt");
  } catch (const std::runtime_error&) {
    return 0;
  }
  if (xtrap::frameCheckpoint(payload) != bytes) std::abort();
  return 0;
}
