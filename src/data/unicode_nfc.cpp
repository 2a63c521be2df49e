#include "data/unicode_nfc.h"

#include <unicode/bytestream.h>
#include <unicode/normalizer2.h>
#include <unicode/uniset.h>

#include <cstdint>
#include <stdexcept>

namespace xtrap {
namespace {

// ICU's NFC restricted to Unicode 9.0's characters ([:age=9.0:] is every character assigned by
// 9.0), built once.
const icu::Normalizer2& unicode9Nfc() {
  static const icu::FilteredNormalizer2* const normalizer = [] {
    UErrorCode status = U_ZERO_ERROR;
    const icu::Normalizer2* nfc = icu::Normalizer2::getNFCInstance(status);
    auto* assigned = new icu::UnicodeSet(icu::UnicodeString(u"[:age=9.0:]"), status);
    if (U_FAILURE(status)) throw std::runtime_error(std::string("ICU NFC: ") + u_errorName(status));
    assigned->freeze();
    return new icu::FilteredNormalizer2(*nfc, *assigned);  // both live as long as the program
  }();
  return *normalizer;
}

}  // namespace

std::string unicodeNfc(std::string_view text) {
  bool ascii = true;
  for (char c : text) ascii = ascii && static_cast<unsigned char>(c) < 0x80;
  if (ascii) return std::string(text);
  if (text.size() > INT32_MAX) throw std::invalid_argument("NFC of more than 2 GiB of text at once");
  std::string out;
  icu::StringByteSink<std::string> sink(&out, static_cast<int32_t>(text.size()));
  UErrorCode status = U_ZERO_ERROR;
  unicode9Nfc().normalizeUTF8(0, icu::StringPiece(text.data(), static_cast<int32_t>(text.size())), sink, nullptr,
                              status);
  if (U_FAILURE(status)) throw std::invalid_argument(std::string("NFC failed: ") + u_errorName(status));
  return out;
}

}  // namespace xtrap
