// libFuzzer: the tokenizer.json reader and encode. Input: a tokenizer.json, a NUL byte, then text.
// A damaged file must be refused with an exception (never a crash, a hang or unbounded memory);
// a file that is accepted must encode the text into ids that all decode.
#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string_view>

#include "data/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t nul = input.find('\0');
  const std::string_view json = input.substr(0, nul);
  const std::string_view text = nul == std::string_view::npos ? std::string_view() : input.substr(nul + 1);
  try {
    const xtrap::Tokenizer tokenizer = xtrap::Tokenizer::fromJson(json, "fuzz.json");
    std::vector<int32_t> ids;
    try {
      ids = tokenizer.encodeWithSpecialTokens(text);
    } catch (const std::invalid_argument&) {  // text that is not UTF-8
      return 0;
    }
    for (int32_t id : ids)
      if (id < 0 || id >= tokenizer.vocabSize()) std::abort();
    tokenizer.decode(tokenizer.encode(text));
  } catch (const std::runtime_error&) {  // a refused file, or a regular expression's resource limit
  }
  return 0;
}
