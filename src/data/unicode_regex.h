#pragma once
// A Unicode regular expression of a tokenizer.json, run by PCRE2 (UTF and UCP modes, JIT where
// available). Hugging Face tokenizers runs these patterns with Oniguruma; the few places where
// Oniguruma's syntax or classes differ from PCRE2's in the patterns this family uses are rewritten
// (see the constructor), and any other Oniguruma-only construct met is refused, never guessed.
// Unicode version: the npm tokenizers 0.23 bundles Oniguruma with Unicode 16.0 tables; Debian 12
// has none that new (PCRE2 10.42: Unicode 14; ICU 72 and Oniguruma 6.9.8: Unicode 15.0). Property
// classes are therefore taken from ICU, Unicode 15.0, which agrees with Hugging Face on every
// character but the ~5,800 assigned in 15.1 and 16.0 (CJK Extension I, Garay, Todhri, ...): those
// are unassigned here, so a pattern's \p{L} or \p{N} does not match them where Hugging Face's does.
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace xtrap {

class UnicodeRegex {
 public:
  // `pattern` in Oniguruma's (Ruby) syntax. Rewritten for PCRE2:
  //  - a character class nested in another ([^(\s|[.,!?])]: BLOOM's pattern) joins the outer one,
  //    which is what the nesting means in Oniguruma; a negated nested class and class
  //    intersection (&&) are refused, and so is Oniguruma's \h (a hexadecimal digit, unlike PCRE2's).
  //  - \s and \S are spelled out as Unicode's White_Space (Oniguruma's), which PCRE2's \s is
  //    but for U+180E; \S inside a class is refused.
  //  - \p{Name}, \p{^Name}, \P{Name} and \pL are spelled out as ranges of ICU's Unicode 15.0
  //    (names as ICU reads them: general categories, scripts, binary properties).
  // Throws std::invalid_argument with the reason when the pattern cannot be compiled.
  explicit UnicodeRegex(std::string_view pattern);
  ~UnicodeRegex();
  UnicodeRegex(const UnicodeRegex&) = delete;
  UnicodeRegex& operator=(const UnicodeRegex&) = delete;

  // A literal string as a pattern that matches exactly it.
  static std::string escape(std::string_view literal);

  // The [start, end) byte ranges of the successive non-overlapping matches in `text` (valid
  // UTF-8), found left to right as Oniguruma's iterator finds them: an empty match is kept except
  // where it would end where the previous match ended, and the search then moves one character on.
  std::vector<std::pair<size_t, size_t>> findAll(std::string_view text) const;

  // Whether the pattern matches anywhere in `text`.
  bool search(std::string_view text) const;

  // `text` (valid UTF-8) with every match, left to right and not overlapping, replaced by
  // `replacement`, in which ${1} is the first group (PCRE2's substitution syntax; '$' itself is
  // $$): Python's re.sub with \1.
  std::string replaceAll(std::string_view text, std::string_view replacement) const;

 private:
  struct Compiled;
  std::unique_ptr<Compiled> compiled_;
};

}  // namespace xtrap
