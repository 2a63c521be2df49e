#pragma once
// The WordPiece model of a tokenizer.json (BERT's, MosaicBERT's, JinaBERT's), as Hugging Face
// tokenizers' models/wordpiece tokenize computes it: a word of more than max_input_chars_per_word
// characters is the unknown token; otherwise greedy longest-match-first from the left, every piece
// but the first looked up with the continuing-subword prefix ("##"); a word with a position no
// piece matches is the unknown token as a whole.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "data/token_model.h"

namespace xtrap {

struct WordPieceSettings {
  std::string unkToken = "[UNK]";
  std::string continuingSubwordPrefix = "##";
  size_t maxInputCharsPerWord = 100;
};

class WordPieceModel : public TokenModel {
 public:
  // Throws std::invalid_argument when the unknown token is not in the vocabulary (Hugging Face
  // fails at the first word that needs it; here the file is refused when read).
  WordPieceModel(std::unordered_map<std::string, int32_t> vocab, WordPieceSettings settings);

  void tokenize(std::string_view word, std::vector<int32_t>& ids) const override;
  std::optional<int32_t> tokenId(const std::string& token) const override;
  size_t vocabSize() const override { return vocab_.size(); }

 private:
  std::unordered_map<std::string, int32_t> vocab_;
  WordPieceSettings settings_;
  int32_t unkId_ = 0;
};

}  // namespace xtrap
