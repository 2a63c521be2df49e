#pragma once
// BERT's text rules, as Hugging Face tokenizers computes them (normalizers/bert.rs,
// pre_tokenizers/bert.rs): the BertNormalizer and the BertPreTokenizer's splits.
// Character classes: control and format characters and private use (clean_text's "other"),
// punctuation and non-spacing marks are tokenizers' unicode_categories tables, read here from ICU
// for the characters Unicode 9.0 assigns (the tables' era, as its NFD's: unicode_nfc.h);
// whitespace is Unicode's White_Space (Rust's char::is_whitespace); lowercase is each
// character's full lowercase mapping without context (Rust's char::to_lowercase: "Σ" is "σ" at a
// word's end too), from ICU 72 (Unicode 15.0).
#include <string>
#include <string_view>
#include <vector>

namespace xtrap {

struct BertNormalizerSettings {
  bool cleanText = true;     // drop NUL, U+FFFD and control/format characters; whitespace -> " "
  bool chineseChars = true;  // a space on either side of every CJK ideograph
  bool stripAccents = true;  // NFD, then drop non-spacing marks (a file's null: as lowercase)
  bool lowercase = true;
};

// `text` (valid UTF-8) through the BertNormalizer's steps, in its order.
std::string bertNormalize(std::string_view text, const BertNormalizerSettings& settings);

// The BertPreTokenizer: split on whitespace (removed), then every punctuation character (ASCII
// punctuation or a P* category) a piece of its own. Appends the pieces of `text` to `pieces`.
void bertPreTokenize(std::string_view text, std::vector<std::string>& pieces);

}  // namespace xtrap
