#include "data/wordpiece_model.h"

#include <stdexcept>

namespace xtrap {

namespace {

bool isContinuationByte(char c) { return (static_cast<unsigned char>(c) & 0xC0) == 0x80; }

size_t characters(std::string_view utf8) {
  size_t n = 0;
  for (char c : utf8) n += isContinuationByte(c) ? 0 : 1;
  return n;
}

}  // namespace

WordPieceModel::WordPieceModel(std::unordered_map<std::string, int32_t> vocab, WordPieceSettings settings)
    : vocab_(std::move(vocab)), settings_(std::move(settings)) {
  auto unk = vocab_.find(settings_.unkToken);
  if (unk == vocab_.end())
    throw std::invalid_argument("WordPiece unk_token \"" + settings_.unkToken + "\" is not in the vocab");
  unkId_ = unk->second;
}

void WordPieceModel::tokenize(std::string_view word, std::vector<int32_t>& ids) const {
  if (characters(word) > settings_.maxInputCharsPerWord) {
    ids.push_back(unkId_);
    return;
  }
  const size_t before = ids.size();
  std::string candidate;
  for (size_t start = 0; start < word.size();) {
    // The longest piece from `start` the vocabulary has, shortening a character at a time.
    size_t end = word.size();
    std::optional<int32_t> found;
    while (start < end) {
      candidate.assign(start > 0 ? settings_.continuingSubwordPrefix : std::string());
      candidate.append(word.substr(start, end - start));
      if (auto it = vocab_.find(candidate); it != vocab_.end()) {
        found = it->second;
        break;
      }
      do --end;
      while (end > start && isContinuationByte(word[end]));
    }
    if (!found) {  // some position no piece matches: the whole word is unknown
      ids.resize(before);
      ids.push_back(unkId_);
      return;
    }
    ids.push_back(*found);
    start = end;
  }
}

std::optional<int32_t> WordPieceModel::tokenId(const std::string& token) const {
  auto it = vocab_.find(token);
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

}  // namespace xtrap
