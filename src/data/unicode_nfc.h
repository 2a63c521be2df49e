#pragma once
// Unicode Normalization Form C, the NFC normalizer of a tokenizer.json (utf8proc).
#include <string>
#include <string_view>

namespace xtrap {

// `text` (valid UTF-8) in NFC. ASCII is its own NFC and is copied without the library.
std::string unicodeNfc(std::string_view text);

}  // namespace xtrap
