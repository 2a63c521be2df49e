#include "data/bert_text.h"

#include <unicode/uchar.h>
#include <unicode/ustring.h>
#include <unicode/utf8.h>

#include <stdexcept>

#include "data/unicode_nfc.h"

namespace xtrap {

namespace {

// Whether Unicode 9.0 assigns `c` (an unassigned character's age is 0.0).
bool assignedBy9(UChar32 c) {
  UVersionInfo age;
  u_charAge(c, age);
  return age[0] != 0 && age[0] <= 9;
}

bool isWhitespace(UChar32 c) { return u_hasBinaryProperty(c, UCHAR_WHITE_SPACE); }

// unicode_categories' is_other: Cc, Cf or Co.
bool isOther(UChar32 c) {
  if (!assignedBy9(c)) return false;
  auto type = u_charType(c);
  return type == U_CONTROL_CHAR || type == U_FORMAT_CHAR || type == U_PRIVATE_USE_CHAR;
}

bool isPunctuation(UChar32 c) {
  if (c < 0x80) return (c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) || (c >= 123 && c <= 126);
  if (!assignedBy9(c)) return false;
  switch (u_charType(c)) {
    case U_CONNECTOR_PUNCTUATION:
    case U_DASH_PUNCTUATION:
    case U_START_PUNCTUATION:
    case U_END_PUNCTUATION:
    case U_INITIAL_PUNCTUATION:
    case U_FINAL_PUNCTUATION:
    case U_OTHER_PUNCTUATION:
      return true;
    default:
      return false;
  }
}

bool isNonSpacingMark(UChar32 c) { return assignedBy9(c) && u_charType(c) == U_NON_SPACING_MARK; }

bool isChinese(UChar32 c) {
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
         (c >= 0x2A700 && c <= 0x2B73F) || (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

void append(std::string& out, UChar32 c) {
  char bytes[U8_MAX_LENGTH];
  int32_t n = 0;
  U8_APPEND_UNSAFE(bytes, n, c);
  out.append(bytes, size_t(n));
}

// Calls f(c) for each code point of valid UTF-8 `text`.
template <typename F>
void forEachCodePoint(std::string_view text, F&& f) {
  const auto* s = reinterpret_cast<const uint8_t*>(text.data());
  auto length = static_cast<int32_t>(text.size());
  for (int32_t i = 0; i < length;) {
    UChar32 c;
    U8_NEXT(s, i, length, c);
    if (c < 0) throw std::invalid_argument("BERT normalizer: text is not valid UTF-8");
    f(c);
  }
}

std::string lowercased(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  forEachCodePoint(text, [&](UChar32 c) {
    if (c < 0x80) {
      out += char(c >= 'A' && c <= 'Z' ? c + 32 : c);
      return;
    }
    UChar in[2], lower[8];
    int32_t n = 0;
    U16_APPEND_UNSAFE(in, n, c);
    UErrorCode status = U_ZERO_ERROR;
    int32_t m = u_strToLower(lower, 8, in, n, "", &status);  // the root locale, no context beyond c
    if (U_FAILURE(status)) throw std::runtime_error(std::string("ICU lowercase: ") + u_errorName(status));
    for (int32_t k = 0; k < m;) {
      UChar32 d;
      U16_NEXT(lower, k, m, d);
      append(out, d);
    }
  });
  return out;
}

}  // namespace

std::string bertNormalize(std::string_view text, const BertNormalizerSettings& settings) {
  std::string out;
  out.reserve(text.size());
  forEachCodePoint(text, [&](UChar32 c) {
    if (settings.cleanText) {
      bool tabOrNewline = c == '\t' || c == '\n' || c == '\r';
      if (c == 0 || c == 0xFFFD || (!tabOrNewline && isOther(c))) return;
      if (tabOrNewline || isWhitespace(c)) c = ' ';
    }
    if (settings.chineseChars && isChinese(c)) {
      out += ' ';
      append(out, c);
      out += ' ';
      return;
    }
    append(out, c);
  });
  if (settings.stripAccents) {
    std::string decomposed = unicodeNfd(out);
    out.clear();
    forEachCodePoint(decomposed, [&](UChar32 c) {
      if (!isNonSpacingMark(c)) append(out, c);
    });
  }
  if (settings.lowercase) out = lowercased(out);
  return out;
}

void bertPreTokenize(std::string_view text, std::vector<std::string>& pieces) {
  std::string piece;
  auto flush = [&] {
    if (!piece.empty()) pieces.push_back(std::move(piece));
    piece.clear();
  };
  forEachCodePoint(text, [&](UChar32 c) {
    if (isWhitespace(c)) {
      flush();
    } else if (isPunctuation(c)) {
      flush();
      append(piece, c);
      flush();
    } else {
      append(piece, c);
    }
  });
  flush();
}

}  // namespace xtrap
