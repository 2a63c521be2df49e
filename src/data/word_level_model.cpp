#include "data/word_level_model.h"

#include <stdexcept>

namespace xtrap {

WordLevelModel::WordLevelModel(std::unordered_map<std::string, int32_t> vocab, const std::string& unkToken)
    : vocab_(std::move(vocab)) {
  auto unk = vocab_.find(unkToken);
  if (unk == vocab_.end())
    throw std::invalid_argument("WordLevel's unk_token \"" + unkToken + "\" is not in its vocab");
  unkId_ = unk->second;
}

void WordLevelModel::tokenize(std::string_view word, std::vector<int32_t>& ids) const {
  auto it = vocab_.find(std::string(word));
  ids.push_back(it == vocab_.end() ? unkId_ : it->second);
}

std::optional<int32_t> WordLevelModel::tokenId(const std::string& token) const {
  auto it = vocab_.find(token);
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

}  // namespace xtrap
