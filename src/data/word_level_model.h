#pragma once
// The WordLevel model of a tokenizer.json, as Hugging Face tokenizers' models/wordlevel computes
// it: each pre-tokenized piece is one token, its vocabulary id, else the unknown token's. What
// `xtrap export --hf` writes for a word-level run (its WikiText vocabulary, whitespace-split).
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "data/token_model.h"

namespace xtrap {

class WordLevelModel : public TokenModel {
 public:
  // Throws std::invalid_argument when the unknown token is not in the vocabulary (Hugging Face
  // fails at the first word that needs it; here the file is refused when read).
  WordLevelModel(std::unordered_map<std::string, int32_t> vocab, const std::string& unkToken);

  void tokenize(std::string_view word, std::vector<int32_t>& ids) const override;
  std::optional<int32_t> tokenId(const std::string& token) const override;
  size_t vocabSize() const override { return vocab_.size(); }

 private:
  std::unordered_map<std::string, int32_t> vocab_;
  int32_t unkId_ = 0;
};

}  // namespace xtrap
