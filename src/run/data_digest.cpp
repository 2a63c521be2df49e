#include "run/data_digest.h"

#include <fmt/format.h>

#include <string_view>

#include "run/checkpoint_file.h"

namespace xtrap {

namespace {
std::string_view bytesOf(const std::vector<int32_t>& ids) {
  return {reinterpret_cast<const char*>(ids.data()), ids.size() * sizeof(int32_t)};
}
}  // namespace

std::string corpusDigest(const Corpus& corpus) {
  uint64_t h = kFnv1a64Basis;
  for (const auto& word : corpus.vocab.words()) h = fnv1a64(std::string_view("\0", 1), fnv1a64(word, h));
  for (const auto* split : {&corpus.train, &corpus.valid, &corpus.test}) {
    uint64_t n = split->size();  // each split's length, so tokens cannot move between splits unseen
    h = fnv1a64(bytesOf(*split), fnv1a64({reinterpret_cast<const char*>(&n), sizeof(n)}, h));
  }
  return fmt::format("fnv1a64:{:016x}", h);
}

std::string dataChangedWarning(const std::string& runDir, const std::string& dataDir, const std::string& recorded,
                               const std::string& current) {
  if (recorded.empty() || recorded == current) return "";
  return fmt::format("the data in {} changed since run {} was trained (data digest {} in run.json, {} now)", dataDir,
                     runDir, recorded, current);
}

}  // namespace xtrap
