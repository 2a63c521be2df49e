#pragma once
// GPT-2's byte-level alphabet, as Hugging Face's ByteLevel pre-tokenizer and decoder use it: each
// of the 256 byte values stands for one printable character (the printable Latin-1 bytes for
// themselves, the others for U+0100 upwards in byte order), so that any bytes become a string
// of vocabulary characters and back.
#include <string>
#include <string_view>

namespace xtrap {

// Appends, for each byte of `bytes`, its alphabet character in UTF-8.
void appendByteLevel(std::string_view bytes, std::string& out);

// The bytes a token of the vocabulary stands for: its characters mapped back through the
// alphabet, or the token's own UTF-8 where a character is outside the alphabet (added tokens
// such as runs of spaces), as Hugging Face's ByteLevel decoder does.
std::string byteLevelToBytes(std::string_view token);

// `bytes` as valid UTF-8: each maximal ill-formed subsequence replaced by U+FFFD, as Rust's
// String::from_utf8_lossy (the decoder's last step) does.
std::string utf8Lossy(std::string_view bytes);

}  // namespace xtrap
