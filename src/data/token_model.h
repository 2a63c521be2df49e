#pragma once
// The model step of a tokenizer.json: a pre-tokenized piece into token ids. BPE (bpe_model.h) and
// WordPiece (wordpiece_model.h) are its two kinds.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace xtrap {

class TokenModel {
 public:
  virtual ~TokenModel() = default;
  // Appends the ids of `word` (one piece the pre-tokenizers gave).
  virtual void tokenize(std::string_view word, std::vector<int32_t>& ids) const = 0;
  virtual std::optional<int32_t> tokenId(const std::string& token) const = 0;
  // The vocabulary's size: added tokens not in it take ids from here on.
  virtual size_t vocabSize() const = 0;
};

}  // namespace xtrap
