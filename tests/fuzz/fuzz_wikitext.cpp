// libFuzzer: the WikiText text path on arbitrary bytes: the UTF-8 / line-length check, then
// (for text that passes, as in loadWikiText) vocabulary building and tokenisation, whose ids
// must all be valid and cover every word plus one <eos> per line.
#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string_view>

#include "data/text_checks.h"
#include "data/wikitext.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    xtrap::checkCorpusText(text, "fuzz");
  } catch (const std::runtime_error&) {
    return 0;
  }
  if (text.empty()) return 0;  // loadWikiText rejects empty splits before building a vocabulary
  xtrap::Vocabulary vocab = xtrap::buildVocabulary(text);
  std::vector<int32_t> ids = xtrap::tokenize(text, vocab);
  size_t tokens = 0;
  xtrap::forEachWikiTextToken(text, [&](std::string_view) { ++tokens; });
  if (ids.size() != tokens) std::abort();
  for (int32_t id : ids)
    if (id < 0 || id >= vocab.size()) std::abort();
  return 0;
}
