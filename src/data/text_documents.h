#pragma once
// The documents of a scored text, for per-document figures (`eval --log-samples`): WikiText's
// articles each begin with a top-level heading line " = Title = " (one "=" on each side; lines
// "= = Section = =" are sections inside an article). Text before the first heading is a document
// of its own with an empty title. Torch-free.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace xtrap {

struct TextDocument {
  int64_t firstToken = 0;  // the token holding the heading's first "=" (0 for the leading text)
  std::string title;       // the heading without its "=" marks ("" for the leading text)
};

// pieces[i]: the text token i spells, in order (a word-level stream: the word with the space
// before it, "\n" for <eos>; a tokenizer's: its decoded string). The documents in order, the
// first starting at token 0; none for an empty stream.
std::vector<TextDocument> headingDocuments(const std::vector<std::string>& pieces);

// The document holding each token index: firstTokens sorted ascending, firstTokens[0] == 0.
int64_t documentOf(const std::vector<int64_t>& firstTokens, int64_t token);

}  // namespace xtrap
