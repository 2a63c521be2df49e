#pragma once
// Unicode Normalization Form C as Hugging Face tokenizers' NFC normalizer computes it. tokenizers
// normalizes with the unicode-normalization-alignments crate (0.1.12), whose tables are Unicode
// 9.0: a composition added since (U+11935 U+11930 -> U+11938, Unicode 13) is not made, and a mark
// assigned since is not reordered. ICU (Unicode 15 in Debian 12's ICU 72) normalizes here with a
// filter to the characters assigned by Unicode 9.0; by Unicode's normalization stability policy
// that equals Unicode 9.0's NFC (a later character is a starter that nothing composes with).
#include <string>
#include <string_view>

namespace xtrap {

// `text` (valid UTF-8) in Unicode 9.0's NFC. ASCII is its own NFC and is copied without ICU.
std::string unicodeNfc(std::string_view text);
// The same for NFD, which BERT's normalizer takes before stripping accents (the same crate).
std::string unicodeNfd(std::string_view text);

}  // namespace xtrap
