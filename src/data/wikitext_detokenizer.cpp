#include "data/wikitext_detokenizer.h"

#include <utility>
#include <vector>

#include "data/unicode_regex.h"

namespace xtrap {
namespace {

std::string replaceLiteral(std::string text, std::string_view from, std::string_view to) {
  std::string out;
  size_t at = 0;
  for (size_t found; (found = text.find(from, at)) != std::string::npos; at = found + from.size()) {
    out.append(text, at, found - at);
    out.append(to);
  }
  out.append(text, at, std::string::npos);
  return out;
}

// Python's \s in a str pattern (str.isspace): Unicode White_Space plus U+001C..U+001F.
#define XTRAP_PY_SPACE \
  "[\\t-\\r\\x1c-\\x20\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}]"

// One re.sub of the reference: pattern (PCRE2, the reference's with \s spelled as above) and
// replacement (PCRE2's $1 for Python's \1).
struct Substitution {
  UnicodeRegex pattern;
  std::string replacement;
};

using Replacements = std::vector<std::pair<std::string, std::string>>;

// The reference's str.replace rules before its bracket rules: number separators, punctuation.
const Replacements& replacementsBeforeBrackets() {
  static const Replacements rules = {{" @-@ ", "-"}, {" @,@ ", ","}, {" @.@ ", "."}, {" : ", ": "}, {" ; ", "; "},
                                     {" . ", ". "},  {" ! ", "! "},  {" ? ", "? "},  {" , ", ", "}};
  return rules;
}

// Its "miscellaneous" rules after them (" \u00b0 " is its " " + chr(176) + " ").
const Replacements& replacementsAfterBrackets() {
  static const Replacements rules = {{"= = = =", "===="}, {"= = =", "==="}, {"= =", "=="},  {" \u00b0 ", "\u00b0"},
                                     {" \n", "\n"},       {"\n ", "\n"},    {" N ", " 1 "}, {" 's", "'s"}};
  return rules;
}

}  // namespace

std::string detokenizeWikiText(std::string_view input) {
  static const Substitution contraction{UnicodeRegex("/' [0-9]/"), "/'[0-9]/"};
  static const Substitution brackets[] = {
      {UnicodeRegex("\\(" XTRAP_PY_SPACE "*([^\\)]*?)" XTRAP_PY_SPACE "*\\)"), "(${1})"},
      {UnicodeRegex("\\[" XTRAP_PY_SPACE "*([^\\]]*?)" XTRAP_PY_SPACE "*\\]"), "[${1}]"},
      {UnicodeRegex("\\{" XTRAP_PY_SPACE "*([^\\}]*?)" XTRAP_PY_SPACE "*\\}"), "{${1}}"},
      {UnicodeRegex("\"" XTRAP_PY_SPACE "*([^\"]*?)" XTRAP_PY_SPACE "*\""), "\"${1}\""},
      {UnicodeRegex("'" XTRAP_PY_SPACE "*([^']*?)" XTRAP_PY_SPACE "*'"), "'${1}'"}};
  // contractions
  std::string s = replaceLiteral(std::string(input), "s '", "s'");
  s = contraction.pattern.replaceAll(s, contraction.replacement);
  for (const auto& [from, to] : replacementsBeforeBrackets()) s = replaceLiteral(std::move(s), from, to);
  // double brackets
  for (const Substitution& b : brackets) s = b.pattern.replaceAll(s, b.replacement);
  // miscellaneous
  for (const auto& [from, to] : replacementsAfterBrackets()) s = replaceLiteral(std::move(s), from, to);
  return s;
}

#undef XTRAP_PY_SPACE

}  // namespace xtrap
