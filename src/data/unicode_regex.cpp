#include "data/unicode_regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <unicode/uniset.h>
#include <unicode/unistr.h>

#include <cctype>
#include <cstdio>
#include <optional>
#include <stdexcept>

namespace xtrap {
namespace {

size_t utf8Length(unsigned char lead) {
  if (lead < 0x80) return 1;
  if ((lead >> 5) == 0x6) return 2;
  if ((lead >> 4) == 0xE) return 3;
  return 4;
}

// Unicode's White_Space, Oniguruma's \s. PCRE2's \s also matches U+180E (White_Space before
// Unicode 6.3), which splits " \u180E" differently from Hugging Face.
const char kWhiteSpace[] =
    "\\t-\\r\\x20\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}";

// The characters of Unicode property `name` (Oniguruma's \p{name}; a leading ^ negates it) as
// PCRE2 class ranges, from ICU's tables: PCRE2 10.42's own are Unicode 14 (see the header).
std::string propertyRanges(std::string_view name, bool negated) {
  if (!name.empty() && name.front() == '^') {
    negated = !negated;
    name.remove_prefix(1);
  }
  UErrorCode status = U_ZERO_ERROR;
  icu::UnicodeSet set(icu::UnicodeString::fromUTF8("[\\p{" + std::string(name) + "}]"), status);
  if (U_FAILURE(status)) throw std::invalid_argument("unknown Unicode property \\p{" + std::string(name) + "}");
  if (negated) set.complement();
  set.remove(0xD800, 0xDFFF);  // surrogates are not characters of UTF-8 text, and PCRE2 refuses them
  if (set.isEmpty()) throw std::invalid_argument("\\p{" + std::string(name) + "} matches no character");
  std::string out;
  char buffer[32];
  for (int32_t i = 0; i < set.getRangeCount(); ++i) {
    const UChar32 first = set.getRangeStart(i), last = set.getRangeEnd(i);
    std::snprintf(buffer, sizeof buffer, first == last ? "\\x{%X}" : "\\x{%X}-\\x{%X}", first, last);
    out += buffer;
  }
  return out;
}

// Oniguruma's syntax, as far as this family's patterns go, in PCRE2's (see the header).
std::string toPcre2(std::string_view p) {
  std::string out;
  int depth = 0;  // character classes open at this point
  size_t i = 0;
  auto openClassBody = [&] {  // a ']' first in a class is a literal in both syntaxes
    if (i < p.size() && p[i] == ']') {
      out += "\\]";
      ++i;
    }
  };
  while (i < p.size()) {
    const char c = p[i];
    if (c == '\\') {
      if (i + 1 >= p.size()) {
        out += c;  // PCRE2 reports the trailing backslash
        ++i;
        continue;
      }
      const char e = p[i + 1];
      if (e == 's') {
        out += depth ? kWhiteSpace : std::string("[") + kWhiteSpace + "]";
      } else if (e == 'S') {
        if (depth) throw std::invalid_argument("\\S inside a character class is not supported");
        out += std::string("[^") + kWhiteSpace + "]";
      } else if (e == 'p' || e == 'P') {
        const bool braced = i + 2 < p.size() && p[i + 2] == '{';  // \p{Name}, or \pL with one letter
        const size_t nameBegin = i + (braced ? 3 : 2);
        const size_t nameEnd = braced ? p.find('}', nameBegin) : nameBegin + 1;
        if (nameEnd == std::string_view::npos || nameEnd > p.size())
          throw std::invalid_argument("\\p without a property name");
        const std::string ranges = propertyRanges(p.substr(nameBegin, nameEnd - nameBegin), e == 'P');
        out += depth ? ranges : "[" + ranges + "]";
        i = nameEnd + (braced ? 1 : 0);
        continue;
      } else if (e == 'h' || e == 'H') {
        throw std::invalid_argument("Oniguruma's \\h (hexadecimal digit) is not supported");
      } else {
        const size_t n = utf8Length(static_cast<unsigned char>(e));
        out += '\\';
        out.append(p.substr(i + 1, n));
        i += 1 + n;
        continue;
      }
      i += 2;
      continue;
    }
    if (depth == 0) {
      out += c;
      ++i;
      if (c == '[') {
        depth = 1;
        if (i < p.size() && p[i] == '^') out += p[i++];
        openClassBody();
      }
      continue;
    }
    if (c == '[') {
      if (p.compare(i, 2, "[:") == 0) {  // a POSIX class such as [:alpha:], the same in both
        const size_t end = p.find(":]", i + 2);
        if (end == std::string_view::npos) throw std::invalid_argument("unterminated POSIX class");
        out.append(p.substr(i, end + 2 - i));
        i = end + 2;
        continue;
      }
      ++i;
      if (i < p.size() && p[i] == '^') throw std::invalid_argument("a negated character class nested in another");
      ++depth;
      openClassBody();
      continue;
    }
    if (c == ']') {
      if (--depth == 0) out += c;
      ++i;
      continue;
    }
    if (c == '&' && i + 1 < p.size() && p[i + 1] == '&')
      throw std::invalid_argument("character class intersection (&&) is not supported");
    out += c;
    ++i;
  }
  return out;
}

// One JIT stack per thread, larger than PCRE2's default 32 KiB: a long run of spaces under
// `\s+(?!\S)` backtracks once per character.
struct MatchContext {
  pcre2_match_context* context = pcre2_match_context_create(nullptr);
  pcre2_jit_stack* stack = pcre2_jit_stack_create(32 * 1024, 8 * 1024 * 1024, nullptr);
  MatchContext() { pcre2_jit_stack_assign(context, nullptr, stack); }
  ~MatchContext() {
    pcre2_jit_stack_free(stack);
    pcre2_match_context_free(context);
  }
};

pcre2_match_context* threadMatchContext() {
  thread_local MatchContext ctx;
  return ctx.context;
}

}  // namespace

struct UnicodeRegex::Compiled {
  pcre2_code* code = nullptr;
  ~Compiled() { pcre2_code_free(code); }

  // Match at or after `offset`; false when there is none. Throws on PCRE2's resource errors
  // (a wrong split would silently change the token ids).
  bool match(std::string_view text, size_t offset, size_t& start, size_t& end) const {
    std::unique_ptr<pcre2_match_data, decltype(&pcre2_match_data_free)> data(
        pcre2_match_data_create_from_pattern(code, nullptr), &pcre2_match_data_free);
    const int rc = pcre2_match(code, reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(), offset, PCRE2_NO_UTF_CHECK,
                               data.get(), threadMatchContext());
    if (rc == PCRE2_ERROR_NOMATCH) return false;
    if (rc < 0) {
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(rc, message, sizeof message);
      throw std::runtime_error(std::string("regular expression match failed: ") + reinterpret_cast<char*>(message));
    }
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(data.get());
    start = ovector[0];
    end = ovector[1];
    return true;
  }
};

UnicodeRegex::UnicodeRegex(std::string_view pattern) : compiled_(std::make_unique<Compiled>()) {
  const std::string translated = toPcre2(pattern);
  int error = 0;
  PCRE2_SIZE errorOffset = 0;
  compiled_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(translated.data()), translated.size(),
                                  PCRE2_UTF | PCRE2_UCP, &error, &errorOffset, nullptr);
  if (!compiled_->code) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error, message, sizeof message);
    throw std::invalid_argument(std::string(reinterpret_cast<char*>(message)) + " in regular expression \"" +
                                std::string(pattern) + "\"");
  }
  pcre2_jit_compile(compiled_->code, PCRE2_JIT_COMPLETE);  // the interpreter runs it where JIT is absent
}

UnicodeRegex::~UnicodeRegex() = default;

std::string UnicodeRegex::escape(std::string_view literal) {
  std::string out;
  for (char c : literal) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x80 && !std::isalnum(u)) out += '\\';  // a backslash before ASCII punctuation is a literal
    out += c;
  }
  return out;
}

std::vector<std::pair<size_t, size_t>> UnicodeRegex::findAll(std::string_view text) const {
  std::vector<std::pair<size_t, size_t>> matches;
  std::optional<size_t> lastMatchEnd;
  size_t position = 0;
  size_t start = 0, end = 0;
  while (position <= text.size() && compiled_->match(text, position, start, end)) {
    if (start == end && lastMatchEnd == end) {  // no empty match right after the previous one
      if (position >= text.size()) break;
      position += utf8Length(static_cast<unsigned char>(text[position]));
      continue;
    }
    matches.emplace_back(start, end);
    position = end;
    lastMatchEnd = end;
  }
  return matches;
}

bool UnicodeRegex::search(std::string_view text) const {
  size_t start = 0, end = 0;
  return compiled_->match(text, 0, start, end);
}

std::string UnicodeRegex::replaceAll(std::string_view text, std::string_view replacement) const {
  std::string out(text.size() + text.size() / 8 + 64, '\0');
  for (int attempt = 0; attempt < 2; ++attempt) {
    PCRE2_SIZE length = out.size();
    const int rc = pcre2_substitute(compiled_->code, reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(), 0,
                                    PCRE2_SUBSTITUTE_GLOBAL | PCRE2_SUBSTITUTE_OVERFLOW_LENGTH | PCRE2_NO_UTF_CHECK,
                                    nullptr, threadMatchContext(), reinterpret_cast<PCRE2_SPTR>(replacement.data()),
                                    replacement.size(), reinterpret_cast<PCRE2_UCHAR*>(out.data()), &length);
    if (rc == PCRE2_ERROR_NOMEMORY) {  // `length` is now what the result needs
      out.assign(length, '\0');
      continue;
    }
    if (rc < 0) {
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(rc, message, sizeof message);
      throw std::runtime_error(std::string("regular expression substitution failed: ") +
                               reinterpret_cast<char*>(message));
    }
    out.resize(length);
    return out;
  }
  throw std::logic_error("pcre2_substitute asked for more room twice");
}

}  // namespace xtrap
