#include "data/bpe_model.h"

#include <fmt/format.h>

#include <queue>
#include <stdexcept>

namespace xtrap {

BpeModel::BpeModel(std::unordered_map<std::string, int32_t> vocab,
                   const std::vector<std::pair<std::string, std::string>>& merges, BpeSettings settings)
    : vocab_(std::move(vocab)), settings_(std::move(settings)) {
  auto idOf = [&](const std::string& token, const char* what) {
    auto it = vocab_.find(token);
    if (it == vocab_.end())
      throw std::invalid_argument(std::string(what) + " \"" + token + "\" is not in the vocabulary");
    return it->second;
  };
  if (settings_.unkToken) unkId_ = idOf(*settings_.unkToken, "unk_token");
  if (settings_.byteFallback) {
    std::vector<std::string> missing;
    for (int byte = 0; byte < 256; ++byte) {
      auto it = vocab_.find(fmt::format("<0x{:02X}>", byte));
      if (it == vocab_.end()) missing.push_back(fmt::format("<0x{:02X}>", byte));
      byteIds_.push_back(it == vocab_.end() ? -1 : it->second);
    }
    if (!missing.empty())
      throw std::invalid_argument(
          fmt::format("byte_fallback is true but the vocabulary lacks {} of the 256 byte "
                      "tokens <0x00> to <0xFF> (first {})",
                      missing.size(), missing.front()));
  }
  const size_t prefixLength = settings_.continuingSubwordPrefix.size();
  merges_.reserve(merges.size());
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const auto& [left, right] = merges[rank];
    const int32_t leftId = idOf(left, "merge token");
    const int32_t rightId = idOf(right, "merge token");
    // The merged token drops the right part's continuing-subword prefix. A right part shorter
    // than the prefix cannot carry it; tokenizers would panic there.
    if (right.size() < prefixLength)
      throw std::invalid_argument("merge token \"" + right + "\" lacks the subword prefix");
    const int32_t resultId = idOf(left + right.substr(prefixLength), "merge result");
    merges_[pairKey(leftId, rightId)] = Merge{static_cast<uint32_t>(rank), resultId};  // a repeated pair: the last wins
  }
}

std::optional<int32_t> BpeModel::tokenId(const std::string& token) const {
  auto it = vocab_.find(token);
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

std::vector<int32_t> BpeModel::mergeWord(std::string_view word) const {
  struct Symbol {
    int32_t id;
    int prev, next;  // neighbours' indices, -1 at the ends
    bool removed;
  };
  std::vector<Symbol> symbols;
  symbols.reserve(word.size());
  auto add = [&](int32_t id) {
    const int index = static_cast<int>(symbols.size());
    if (index > 0) symbols.back().next = index;
    symbols.push_back(Symbol{id, index - 1, -1, false});
  };
  int32_t pendingUnk = -1;  // an unk_token not yet added (fuse_unk grows it), or -1
  std::string piece;
  for (size_t i = 0; i < word.size();) {
    const auto lead = static_cast<unsigned char>(word[i]);
    const size_t length = lead < 0x80 ? 1 : (lead >> 5) == 0x6 ? 2 : (lead >> 4) == 0xE ? 3 : 4;
    piece.clear();
    if (i > 0) piece += settings_.continuingSubwordPrefix;
    piece.append(word.substr(i, length));
    i += length;
    if (i >= word.size()) piece += settings_.endOfWordSuffix;
    auto it = vocab_.find(piece);
    if (it != vocab_.end()) {
      if (pendingUnk >= 0) add(pendingUnk);
      pendingUnk = -1;
      add(it->second);
    } else if (settings_.byteFallback) {
      // Bytes of the piece with its prefix and suffix, and without adding a pending unk_token
      // first, as tokenizers' merge_word does (every byte has a token: checked at load).
      for (char byte : piece) add(byteIds_[static_cast<unsigned char>(byte)]);
    } else if (unkId_) {
      if (pendingUnk >= 0 && !settings_.fuseUnk) add(pendingUnk);
      pendingUnk = *unkId_;
    }
  }
  if (pendingUnk >= 0) add(pendingUnk);

  struct Candidate {
    uint32_t rank;
    int position;
    int32_t result;
  };
  auto later = [](const Candidate& a, const Candidate& b) {
    return a.rank != b.rank ? a.rank > b.rank : a.position > b.position;
  };
  std::priority_queue<Candidate, std::vector<Candidate>, decltype(later)> queue(later);
  auto consider = [&](int position) {
    const int next = symbols[position].next;
    if (next < 0) return;
    auto it = merges_.find(pairKey(symbols[position].id, symbols[next].id));
    if (it != merges_.end()) queue.push(Candidate{it->second.rank, position, it->second.result});
  };
  for (int i = 0; i + 1 < static_cast<int>(symbols.size()); ++i) consider(i);
  while (!queue.empty()) {
    const Candidate top = queue.top();
    queue.pop();
    Symbol& left = symbols[top.position];
    if (left.removed || left.next < 0) continue;
    Symbol& right = symbols[left.next];
    // A stale entry: one of the pair has merged since it was queued.
    auto it = merges_.find(pairKey(left.id, right.id));
    if (it == merges_.end() || it->second.result != top.result) continue;
    left.id = top.result;
    right.removed = true;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = top.position;
    if (left.prev >= 0) consider(left.prev);
    consider(top.position);
  }
  std::vector<int32_t> ids;
  for (const Symbol& s : symbols)
    if (!s.removed) ids.push_back(s.id);
  return ids;
}

void BpeModel::tokenize(std::string_view word, std::vector<int32_t>& ids) const {
  if (word.empty()) return;
  const std::string key(word);
  if (settings_.ignoreMerges) {
    auto it = vocab_.find(key);
    if (it != vocab_.end()) {
      ids.push_back(it->second);
      return;
    }
  }
  {
    std::lock_guard<std::mutex> lock(cacheMutex_);
    auto hit = cache_.find(key);
    if (hit != cache_.end()) {
      ids.insert(ids.end(), hit->second.begin(), hit->second.end());
      return;
    }
  }
  std::vector<int32_t> merged = mergeWord(word);
  ids.insert(ids.end(), merged.begin(), merged.end());
  if (word.size() < kCacheMaxWordBytes) {
    std::lock_guard<std::mutex> lock(cacheMutex_);
    if (cache_.size() < kCacheCapacity) cache_.emplace(key, std::move(merged));
  }
}

}  // namespace xtrap
