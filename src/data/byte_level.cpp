#include "data/byte_level.h"

#include <array>
#include <cstdint>

namespace xtrap {
namespace {

struct Alphabet {
  std::array<std::string, 256> charOfByte;  // UTF-8 of each byte's character
  std::array<int, 324> byteOfChar{};        // code point -> byte, -1 outside the alphabet

  Alphabet() {
    byteOfChar.fill(-1);
    int next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      const int code = printable ? b : next++;
      byteOfChar[code] = b;
      std::string& s = charOfByte[b];
      if (code < 0x80) {
        s += static_cast<char>(code);
      } else {
        s += static_cast<char>(0xC0 | (code >> 6));
        s += static_cast<char>(0x80 | (code & 0x3F));
      }
    }
  }
};

const Alphabet& alphabet() {
  static const Alphabet instance;
  return instance;
}

}  // namespace

void appendByteLevel(std::string_view bytes, std::string& out) {
  const Alphabet& a = alphabet();
  for (unsigned char b : bytes) out += a.charOfByte[b];
}

std::string byteLevelToBytes(std::string_view token) {
  const Alphabet& a = alphabet();
  std::string bytes;
  // The alphabet's characters are all one or two bytes long (below U+0144).
  for (size_t i = 0; i < token.size();) {
    const auto lead = static_cast<unsigned char>(token[i]);
    int code = -1;
    if (lead < 0x80) {
      code = lead;
      i += 1;
    } else if ((lead >> 5) == 0x6 && i + 1 < token.size()) {
      code = ((lead & 0x1F) << 6) | (static_cast<unsigned char>(token[i + 1]) & 0x3F);
      i += 2;
    }
    const int byte = code >= 0 && code < static_cast<int>(a.byteOfChar.size()) ? a.byteOfChar[code] : -1;
    if (byte < 0) return std::string(token);
    bytes += static_cast<char>(byte);
  }
  return bytes;
}

std::string utf8Lossy(std::string_view bytes) {
  static const char kReplacement[] = "\xEF\xBF\xBD";
  std::string out;
  out.reserve(bytes.size());
  size_t i = 0;
  while (i < bytes.size()) {
    const auto lead = static_cast<unsigned char>(bytes[i]);
    if (lead < 0x80) {
      out += bytes[i++];
      continue;
    }
    size_t length = 0;
    unsigned char low = 0x80, high = 0xBF;  // the valid range of the second byte
    if (lead >= 0xC2 && lead <= 0xDF) {
      length = 2;
    } else if (lead >= 0xE0 && lead <= 0xEF) {
      length = 3;
      if (lead == 0xE0) low = 0xA0;
      if (lead == 0xED) high = 0x9F;  // no surrogates
    } else if (lead >= 0xF0 && lead <= 0xF4) {
      length = 4;
      if (lead == 0xF0) low = 0x90;
      if (lead == 0xF4) high = 0x8F;  // nothing above U+10FFFF
    }
    size_t valid = 1;  // bytes of the sequence checked so far
    while (length && valid < length && i + valid < bytes.size()) {
      const auto b = static_cast<unsigned char>(bytes[i + valid]);
      const bool ok = valid == 1 ? (b >= low && b <= high) : (b >= 0x80 && b <= 0xBF);
      if (!ok) break;
      ++valid;
    }
    if (length && valid == length) {
      out.append(bytes.substr(i, length));
    } else {
      out += kReplacement;  // the maximal subpart: the lead and the continuation bytes that fit
    }
    i += valid;
  }
  return out;
}

}  // namespace xtrap
