#pragma once
// Input hygiene for corpus files: WikiText is UTF-8 text with short lines. Binary junk or a
// runaway line would otherwise become a huge vocabulary entry or an absurd token, so the
// loader rejects them with a message that points at the byte.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace xtrap {

constexpr size_t kMaxLineBytes = size_t(1) << 20;  // WikiText-103's longest line is ~100 KB

// Offset of the first byte that does not start or continue a valid UTF-8 sequence
// (overlong forms, surrogates and code points above U+10FFFF are invalid), or npos.
size_t firstInvalidUtf8(std::string_view text);

// Throws std::runtime_error naming `file`, the line and the byte for invalid UTF-8 or a line
// longer than kMaxLineBytes.
void checkCorpusText(std::string_view text, const std::string& file);

}  // namespace xtrap
