#pragma once
// The BPE model of a Hugging Face tokenizer.json: a word (one pre-tokenized piece, already in
// the byte-level alphabet) is split into characters, and the pair of adjacent symbols with the
// lowest merge rank (the leftmost among equals) is merged until no ranked pair is left, exactly
// as tokenizers' Word::merge_all does. Pairs are looked up by id in a hash map; words' ids are
// cached (up to 10 000 words shorter than 256 bytes, as tokenizers caches them). With byte
// fallback (SentencePiece's BPE: Llama 2, Mistral, Gemma), a character outside the vocabulary
// becomes the <0xHH> tokens of its UTF-8 bytes.
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "data/token_model.h"

namespace xtrap {

struct BpeSettings {
  std::optional<std::string> unkToken;  // characters outside the vocabulary become it; dropped without
  bool fuseUnk = false;                 // consecutive unknown characters make one unk_token
  bool ignoreMerges = false;            // a word that is itself in the vocabulary is that token
  std::string continuingSubwordPrefix;  // prepended to every character but a word's first
  std::string endOfWordSuffix;          // appended to a word's last character
  bool byteFallback = false;            // a character outside the vocabulary becomes its bytes' <0xHH> tokens
};

class BpeModel : public TokenModel {
 public:
  // `merges` in rank order. Throws std::invalid_argument naming a merge whose parts or result
  // are not in the vocabulary, an unk_token that is not, or byte fallback without the 256 byte
  // tokens <0x00> to <0xFF> (Hugging Face would fall back to unk_token for a byte without one).
  BpeModel(std::unordered_map<std::string, int32_t> vocab,
           const std::vector<std::pair<std::string, std::string>>& merges, BpeSettings settings);

  // Appends the ids of `word`.
  void tokenize(std::string_view word, std::vector<int32_t>& ids) const override;

  std::optional<int32_t> tokenId(const std::string& token) const override;
  size_t vocabSize() const override { return vocab_.size(); }

 private:
  struct Merge {
    uint32_t rank;
    int32_t result;
  };
  static uint64_t pairKey(int32_t left, int32_t right) { return (uint64_t(uint32_t(left)) << 32) | uint32_t(right); }
  std::vector<int32_t> mergeWord(std::string_view word) const;

  std::unordered_map<std::string, int32_t> vocab_;
  std::unordered_map<uint64_t, Merge> merges_;
  BpeSettings settings_;
  std::optional<int32_t> unkId_;
  std::vector<int32_t> byteIds_;  // byte fallback's <0xHH> token of each byte value

  static constexpr size_t kCacheCapacity = 10000;
  static constexpr size_t kCacheMaxWordBytes = 256;
  mutable std::mutex cacheMutex_;
  mutable std::unordered_map<std::string, std::vector<int32_t>> cache_;
};

}  // namespace xtrap
