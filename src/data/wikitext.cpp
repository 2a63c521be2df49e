#include "data/wikitext.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "util/atomic_file.h"

namespace xtrap {
namespace fs = std::filesystem;

namespace {

constexpr char kCacheMagic[8] = {'X', 'T', 'R', 'A', 'P', 'T', 'O', 'K'};
constexpr uint32_t kCacheVersion = 1;
const char* kSplits[3] = {"train", "valid", "test"};

fs::path splitPath(const fs::path& dir, const char* split) {
  return dir / (std::string("wiki.") + split + ".tokens");
}

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

template <typename T>
void writePod(std::ostream& out, const T& v) {
  out.write(reinterpret_cast<const char*>(&v), sizeof(T));
}
template <typename T>
bool readPod(std::istream& in, T& v) {
  return static_cast<bool>(in.read(reinterpret_cast<char*>(&v), sizeof(T)));
}

void writeCache(const fs::path& file, const std::vector<int64_t>& stamp, const Corpus& c) {
  writeFileAtomically(file, [&](std::ostream& out) {
    out.write(kCacheMagic, sizeof(kCacheMagic));
    writePod(out, kCacheVersion);
    for (int64_t s : stamp) writePod(out, s);
    writePod(out, static_cast<uint64_t>(c.vocab.size()));
    for (const auto& w : c.vocab.words()) {
      writePod(out, static_cast<uint32_t>(w.size()));
      out.write(w.data(), static_cast<std::streamsize>(w.size()));
    }
    for (const auto* ids : {&c.train, &c.valid, &c.test}) {
      writePod(out, static_cast<uint64_t>(ids->size()));
      out.write(reinterpret_cast<const char*>(ids->data()),
                static_cast<std::streamsize>(ids->size() * sizeof(int32_t)));
    }
  });
}

// Returns false (and the caller re-parses) on any mismatch or damage.
bool readCache(const fs::path& file, const std::vector<int64_t>& stamp, Corpus& c) {
  std::ifstream in(file, std::ios::binary);
  if (!in) return false;
  char magic[8];
  uint32_t version = 0;
  if (!in.read(magic, 8) || std::memcmp(magic, kCacheMagic, 8) != 0) return false;
  if (!readPod(in, version) || version != kCacheVersion) return false;
  for (int64_t expected : stamp) {
    int64_t s;
    if (!readPod(in, s) || s != expected) return false;
  }
  uint64_t nWords = 0;
  if (!readPod(in, nWords) || nWords > (1u << 28)) return false;
  std::vector<std::string> words(nWords);
  for (auto& w : words) {
    uint32_t len = 0;
    if (!readPod(in, len) || len > (1u << 20)) return false;
    w.resize(len);
    if (!in.read(w.data(), len)) return false;
  }
  for (auto* ids : {&c.train, &c.valid, &c.test}) {
    uint64_t n = 0;
    if (!readPod(in, n) || n > (uint64_t(1) << 34)) return false;
    ids->resize(n);
    if (!in.read(reinterpret_cast<char*>(ids->data()), static_cast<std::streamsize>(n * 4)))
      return false;
    for (int32_t id : *ids)
      if (id < 0 || static_cast<uint64_t>(id) >= nWords) return false;
  }
  try {
    c.vocab = Vocabulary(std::move(words));
  } catch (const std::exception&) {
    return false;
  }
  return true;
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
  if (!fs::is_directory(dir))
    throw std::runtime_error("data directory not found: " + dir.string());
  for (const char* s : kSplits) {
    auto p = splitPath(dir, s);
    if (!fs::is_regular_file(p)) throw std::runtime_error("missing split file: " + p.string());
  }
  Corpus c;
  c.dir = dir;
  auto stamp = sourceStamp(dir);
  auto cacheFile = dir / ".xtrap-cache.bin";
  if (readCache(cacheFile, stamp, c)) return c;

  std::string trainText = readTextFile(splitPath(dir, "train"));
  c.vocab = buildVocabulary(trainText);
  c.train = tokenize(trainText, c.vocab);
  trainText.clear();
  c.valid = tokenize(readTextFile(splitPath(dir, "valid")), c.vocab);
  c.test = tokenize(readTextFile(splitPath(dir, "test")), c.vocab);
  for (const char* s : kSplits)
    if (c.split(s).empty()) throw std::runtime_error("empty split: " + splitPath(dir, s).string());
  try {
    writeCache(cacheFile, stamp, c);
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
