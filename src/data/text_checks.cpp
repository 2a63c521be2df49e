#include "data/text_checks.h"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

namespace xtrap {
namespace {

// Length of the valid UTF-8 sequence starting at text[i], or 0 if it is invalid (RFC 3629).
size_t sequenceLength(std::string_view text, size_t i) {
  auto byte = [&](size_t k) { return static_cast<unsigned char>(text[k]); };
  unsigned char b = byte(i);
  if (b < 0x80) return 1;
  size_t n;
  unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (b >= 0xC2 && b <= 0xDF) {
    n = 2;
  } else if (b >= 0xE0 && b <= 0xEF) {
    n = 3;
    if (b == 0xE0) lo = 0xA0;  // overlong
    if (b == 0xED) hi = 0x9F;  // UTF-16 surrogates
  } else if (b >= 0xF0 && b <= 0xF4) {
    n = 4;
    if (b == 0xF0) lo = 0x90;  // overlong
    if (b == 0xF4) hi = 0x8F;  // above U+10FFFF
  } else {
    return 0;
  }
  if (i + n > text.size()) return 0;
  if (byte(i + 1) < lo || byte(i + 1) > hi) return 0;
  for (size_t k = 2; k < n; ++k)
    if (byte(i + k) < 0x80 || byte(i + k) > 0xBF) return 0;
  return n;
}

}  // namespace

size_t firstInvalidUtf8(std::string_view text) {
  for (size_t i = 0; i < text.size();) {
    size_t n = sequenceLength(text, i);
    if (n == 0) return i;
    i += n;
  }
  return std::string_view::npos;
}

void checkCorpusText(std::string_view text, const std::string& file) {
  size_t bad = firstInvalidUtf8(text);
  // Check line lengths only up to the first bad byte so that the earliest problem is reported.
  std::string_view checked = text.substr(0, bad);
  size_t line = 1;
  for (size_t start = 0; start <= checked.size();) {
    size_t end = std::min(checked.find('\n', start), checked.size());
    if (end - start > kMaxLineBytes)
      throw std::runtime_error(
          fmt::format("{}: line {} is {} bytes long (limit {})", file, line, end - start, kMaxLineBytes));
    if (end == checked.size()) break;
    start = end + 1;
    ++line;
  }
  if (bad != std::string_view::npos)
    throw std::runtime_error(fmt::format("{}: invalid UTF-8 at line {}, byte offset {} (0x{:02X})", file, line, bad,
                                         static_cast<unsigned char>(text[bad])));
}

}  // namespace xtrap
