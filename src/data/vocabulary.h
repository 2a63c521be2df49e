#pragma once
// Word vocabulary built from a training split: ids are deterministic (descending frequency, ties
// by first appearance) so that adaptive-softmax cutoffs mean "the N most frequent words".
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace xtrap {

class Vocabulary {
 public:
  static constexpr std::string_view kEos = "<eos>";
  static constexpr std::string_view kUnk = "<unk>";
  static constexpr std::string_view kMask = "<mask>";
  static constexpr std::string_view kBos = "<bos>";

  Vocabulary() = default;
  explicit Vocabulary(std::vector<std::string> words);

  // Appends a word that is not in the data (e.g. <mask> for masked LM); returns its id.
  int32_t addSpecial(std::string_view word);

  int32_t id(std::string_view word) const;  // unknown words map to <unk>
  bool contains(std::string_view word) const { return index_.count(std::string(word)) > 0; }
  const std::string& word(int32_t id) const { return words_.at(static_cast<size_t>(id)); }
  int64_t size() const { return static_cast<int64_t>(words_.size()); }
  const std::vector<std::string>& words() const { return words_; }
  int32_t eos() const { return eos_; }
  // Every id but the specials (<eos>, <unk>, <mask>, <bos>): what MLM may substitute for a word.
  std::vector<int32_t> realWords() const;
  int32_t unk() const { return unk_; }

 private:
  std::vector<std::string> words_;
  std::unordered_map<std::string, int32_t> index_;
  int32_t eos_ = -1;
  int32_t unk_ = -1;
};

}  // namespace xtrap
