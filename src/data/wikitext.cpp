#include "data/wikitext.h"

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <stdexcept>

#include "data/text_checks.h"
#include "data/token_cache.h"
#include "util/atomic_file.h"

namespace xtrap {
namespace fs = std::filesystem;

namespace {

const char* kSplits[3] = {"train", "valid", "test"};

fs::path splitPath(const fs::path& dir, const char* split) { return dir / (std::string("wiki.") + split + ".tokens"); }

// What the cache is valid for: each split file's size and modification time.
std::vector<int64_t> sourceStamp(const fs::path& dir) {
  std::vector<int64_t> stamp;
  for (const char* s : kSplits) {
    auto p = splitPath(dir, s);
    stamp.push_back(static_cast<int64_t>(fs::file_size(p)));
    stamp.push_back(static_cast<int64_t>(fs::last_write_time(p).time_since_epoch().count()));
  }
  return stamp;
}

}  // namespace

const std::vector<int32_t>& Corpus::split(const std::string& name) const {
  if (name == "train") return train;
  if (name == "valid") return valid;
  if (name == "test") return test;
  throw std::runtime_error("unknown split '" + name + "' (expected train, valid or test)");
}

Vocabulary buildVocabulary(std::string_view trainText) {
  struct Entry {
    int64_t count = 0;
    int64_t first = 0;
  };
  std::unordered_map<std::string_view, Entry> counts;
  int64_t order = 0;
  forEachWikiTextToken(trainText, [&](std::string_view w) {
    auto [it, inserted] = counts.try_emplace(w);
    if (inserted) it->second.first = order++;
    ++it->second.count;
  });
  std::vector<std::pair<std::string_view, Entry>> sorted(counts.begin(), counts.end());
  std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) {
    if (a.second.count != b.second.count) return a.second.count > b.second.count;
    return a.second.first < b.second.first;
  });
  std::vector<std::string> words;
  words.reserve(sorted.size());
  for (const auto& [w, e] : sorted) words.emplace_back(w);
  return Vocabulary(std::move(words));
}

std::vector<int32_t> tokenize(std::string_view text, const Vocabulary& vocab) {
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 5);
  // Looking words up through a string_view-keyed map avoids one std::string per token.
  std::unordered_map<std::string_view, int32_t> fast;
  fast.reserve(static_cast<size_t>(vocab.size()) * 2);
  for (int32_t i = 0; i < vocab.size(); ++i) fast.emplace(vocab.word(i), i);
  forEachWikiTextToken(text, [&](std::string_view w) {
    auto it = fast.find(w);
    ids.push_back(it == fast.end() ? vocab.unk() : it->second);
  });
  return ids;
}

Corpus loadWikiText(const fs::path& dir) {
  if (!fs::is_directory(dir)) throw std::runtime_error("data directory not found: " + dir.string());
  // Without this an unlistable directory would report its files as missing.
  if (::access(dir.c_str(), R_OK | X_OK) != 0) throw std::runtime_error("cannot read data directory: " + dir.string());
  for (const char* s : kSplits) {
    auto p = splitPath(dir, s);
    if (!fs::is_regular_file(p)) throw std::runtime_error("missing split file: " + p.string());
    // Checked before the cache is used so that a damaged directory fails the same way every time.
    if (!std::ifstream(p)) throw std::runtime_error("cannot read split file: " + p.string());
    if (fs::file_size(p) == 0) throw std::runtime_error("empty split: " + p.string());
  }
  Corpus c;
  c.dir = dir;
  auto stamp = sourceStamp(dir);
  auto cacheFile = dir / ".xtrap-cache.bin";
  if (std::ifstream cache(cacheFile, std::ios::binary); cache && readTokenCache(cache, stamp, c)) return c;

  auto readSplit = [&](const char* s) {
    auto p = splitPath(dir, s);
    std::string text = readTextFile(p);
    checkCorpusText(text, p.string());
    return text;
  };
  std::string trainText = readSplit("train");
  c.vocab = buildVocabulary(trainText);
  c.train = tokenize(trainText, c.vocab);
  trainText.clear();
  c.valid = tokenize(readSplit("valid"), c.vocab);
  c.test = tokenize(readSplit("test"), c.vocab);
  try {
    writeFileAtomically(cacheFile, [&](std::ostream& out) { writeTokenCache(out, stamp, c); });
  } catch (const std::exception&) {
    // Read-only data directory: no cache, the next load parses again.
  }
  return c;
}

fs::path defaultDataDir() {
  // Installed next to the binary's source tree: XTRAP_DATA_DIR is set by CMake at build time.
  return fs::path(XTRAP_DEFAULT_DATA_DIR);
}

}  // namespace xtrap
