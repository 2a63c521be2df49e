#include "data/normalizer.h"

#include "data/unicode_nfc.h"

namespace xtrap {

void Normalizer::addNfc() { steps_.push_back({Step::Nfc, "", nullptr, {}}); }

void Normalizer::addPrepend(std::string prefix) { steps_.push_back({Step::Prepend, std::move(prefix), nullptr, {}}); }

void Normalizer::addBert(const BertNormalizerSettings& settings) {
  steps_.push_back({Step::Bert, "", nullptr, settings});
}

void Normalizer::addReplace(std::shared_ptr<const UnicodeRegex> regex, const std::string& content) {
  std::string substitution;  // '$' starts a group reference in PCRE2's syntax; "$$" is a '$'
  for (char c : content) substitution += c == '$' ? std::string("$$") : std::string(1, c);
  steps_.push_back({Step::Replace, std::move(substitution), std::move(regex), {}});
}

std::string Normalizer::apply(std::string_view text) const {
  std::string out(text);
  for (const Step& step : steps_) {
    switch (step.kind) {
      case Step::Nfc:
        out = unicodeNfc(out);
        break;
      case Step::Prepend:
        if (!out.empty()) out.insert(0, step.text);
        break;
      case Step::Replace:
        out = step.regex->replaceAll(out, step.text);
        break;
      case Step::Bert:
        out = bertNormalize(out, step.bert);
        break;
    }
  }
  return out;
}

}  // namespace xtrap
