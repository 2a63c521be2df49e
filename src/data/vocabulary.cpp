#include "data/vocabulary.h"

#include <stdexcept>

namespace xtrap {

Vocabulary::Vocabulary(std::vector<std::string> words) : words_(std::move(words)) {
  for (size_t i = 0; i < words_.size(); ++i) {
    if (!index_.emplace(words_[i], static_cast<int32_t>(i)).second)
      throw std::runtime_error("vocabulary has a duplicate word: " + words_[i]);
  }
  auto find = [&](std::string_view w) {
    auto it = index_.find(std::string(w));
    return it == index_.end() ? -1 : it->second;
  };
  eos_ = find(kEos);
  unk_ = find(kUnk);
  if (eos_ < 0) throw std::runtime_error("vocabulary has no <eos>");
  if (unk_ < 0) unk_ = addSpecial(kUnk);
}

int32_t Vocabulary::addSpecial(std::string_view word) {
  auto it = index_.find(std::string(word));
  if (it != index_.end()) return it->second;
  int32_t id = static_cast<int32_t>(words_.size());
  words_.emplace_back(word);
  index_.emplace(words_.back(), id);
  return id;
}

std::vector<int32_t> Vocabulary::realWords() const {
  std::vector<int32_t> ids;
  for (size_t i = 0; i < words_.size(); ++i)
    if (words_[i] != kEos && words_[i] != kUnk && words_[i] != kMask && words_[i] != kBos)
      ids.push_back(static_cast<int32_t>(i));
  return ids;
}

int32_t Vocabulary::id(std::string_view word) const {
  auto it = index_.find(std::string(word));
  return it == index_.end() ? unk_ : it->second;
}

}  // namespace xtrap
