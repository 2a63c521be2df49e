#include "data/tokenizer.h"

#include <stdexcept>

#include "data/text_checks.h"

namespace xtrap {

void Tokenizer::appendIds(std::string_view text, std::vector<int32_t>& ids) const {
  const size_t bad = firstInvalidUtf8(text);
  if (bad != std::string_view::npos)
    throw std::invalid_argument("text is not valid UTF-8 at byte " + std::to_string(bad));
  std::vector<std::string> pieces;
  for (const TextSegment& raw : rawAddedTokens_->split(text)) {
    if (raw.id >= 0) {
      ids.push_back(raw.id);
      continue;
    }
    const std::string_view stretch = text.substr(raw.begin, raw.end - raw.begin);
    const std::string normalized = normalizer_->apply(stretch);
    for (const TextSegment& segment : normalizedAddedTokens_->split(normalized)) {
      if (segment.id >= 0) {
        ids.push_back(segment.id);
        continue;
      }
      pieces.clear();
      preTokenizer_->apply(std::string_view(normalized).substr(segment.begin, segment.end - segment.begin),
                           raw.begin == 0 && segment.begin == 0, pieces);
      for (const std::string& piece : pieces) model_->tokenize(piece, ids);
    }
  }
}

std::vector<int32_t> Tokenizer::encode(std::string_view text) const {
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3);
  appendIds(text, ids);
  return ids;
}

std::vector<int32_t> Tokenizer::encodeWithSpecialTokens(std::string_view text) const {
  std::vector<int32_t> ids = encode(text);
  for (const std::vector<TemplatePiece>& pieces : templates_) {
    std::vector<int32_t> applied;
    for (const TemplatePiece& piece : pieces) {
      const std::vector<int32_t>& part = piece.sequence ? ids : piece.ids;
      applied.insert(applied.end(), part.begin(), part.end());
    }
    ids = std::move(applied);
  }
  return ids;
}

Tokenizer::SpecialFrame Tokenizer::specialFrame() const {
  // The templates apply in order, each wrapping what the previous one made.
  SpecialFrame frame;
  for (const std::vector<TemplatePiece>& pieces : templates_) {
    SpecialFrame outer;
    bool seen = false;
    for (const TemplatePiece& piece : pieces) {
      std::vector<int32_t>& side = seen ? outer.after : outer.before;
      if (piece.sequence) {
        seen = true;
        continue;
      }
      side.insert(side.end(), piece.ids.begin(), piece.ids.end());
    }
    outer.before.insert(outer.before.end(), frame.before.begin(), frame.before.end());
    outer.after.insert(outer.after.begin(), frame.after.begin(), frame.after.end());
    frame = std::move(outer);
  }
  return frame;
}

std::string Tokenizer::decode(const std::vector<int32_t>& ids) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (int32_t id : ids) {
    auto it = tokenOfId_.find(id);
    if (it == tokenOfId_.end()) throw std::out_of_range("no token has id " + std::to_string(id));
    tokens.push_back(it->second);
  }
  return decoder_->decode(std::move(tokens));
}

std::optional<int32_t> Tokenizer::tokenId(const std::string& token) const {
  auto it = addedIds_.find(token);
  if (it != addedIds_.end()) return it->second;
  return model_->tokenId(token);
}

}  // namespace xtrap
