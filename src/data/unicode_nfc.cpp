#include "data/unicode_nfc.h"

#include <unicode/bytestream.h>
#include <unicode/normalizer2.h>
#include <unicode/uniset.h>

#include <cstdint>
#include <stdexcept>

namespace xtrap {
namespace {

// ICU's normalizer of a form restricted to Unicode 9.0's characters ([:age=9.0:] is every
// character assigned by 9.0), built once.
const icu::Normalizer2& unicode9(const icu::Normalizer2* (*instance)(UErrorCode&), const char* form) {
  UErrorCode status = U_ZERO_ERROR;
  const icu::Normalizer2* base = instance(status);
  static const icu::UnicodeSet* const assigned = [&] {
    auto* set = new icu::UnicodeSet(icu::UnicodeString(u"[:age=9.0:]"), status);  // lives as long as the program
    set->freeze();
    return set;
  }();
  if (U_FAILURE(status)) throw std::runtime_error(std::string("ICU ") + form + ": " + u_errorName(status));
  return *new icu::FilteredNormalizer2(*base, *assigned);
}

const icu::Normalizer2& unicode9Nfc() {
  static const icu::Normalizer2& normalizer = unicode9(icu::Normalizer2::getNFCInstance, "NFC");
  return normalizer;
}

const icu::Normalizer2& unicode9Nfd() {
  static const icu::Normalizer2& normalizer = unicode9(icu::Normalizer2::getNFDInstance, "NFD");
  return normalizer;
}

std::string normalized(const icu::Normalizer2& normalizer, std::string_view text, const char* form) {
  bool ascii = true;
  for (char c : text) ascii = ascii && static_cast<unsigned char>(c) < 0x80;
  if (ascii) return std::string(text);
  if (text.size() > INT32_MAX) throw std::invalid_argument(std::string(form) + " of more than 2 GiB of text at once");
  std::string out;
  icu::StringByteSink<std::string> sink(&out, static_cast<int32_t>(text.size()));
  UErrorCode status = U_ZERO_ERROR;
  normalizer.normalizeUTF8(0, icu::StringPiece(text.data(), static_cast<int32_t>(text.size())), sink, nullptr, status);
  if (U_FAILURE(status)) throw std::invalid_argument(std::string(form) + " failed: " + u_errorName(status));
  return out;
}

}  // namespace

std::string unicodeNfc(std::string_view text) { return normalized(unicode9Nfc(), text, "NFC"); }

std::string unicodeNfd(std::string_view text) { return normalized(unicode9Nfd(), text, "NFD"); }

}  // namespace xtrap
