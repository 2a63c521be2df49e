#include "data/token_cache.h"

#include <algorithm>
#include <cstring>

namespace xtrap {
namespace {

constexpr char kCacheMagic[8] = {'X', 'T', 'R', 'A', 'P', 'T', 'O', 'K'};
constexpr uint32_t kCacheVersion = 1;
constexpr uint32_t kMaxWordBytes = 1u << 20;
constexpr uint64_t kMaxWords = uint64_t(1) << 28;
constexpr uint64_t kMaxIds = uint64_t(1) << 34;
// Ids are read in blocks so that a damaged length field costs no more memory than the file holds.
constexpr uint64_t kIdBlock = uint64_t(1) << 20;

template <typename T>
void writePod(std::ostream& out, const T& v) {
  out.write(reinterpret_cast<const char*>(&v), sizeof(T));
}
template <typename T>
bool readPod(std::istream& in, T& v) {
  return static_cast<bool>(in.read(reinterpret_cast<char*>(&v), sizeof(T)));
}

bool readIds(std::istream& in, uint64_t vocabSize, std::vector<int32_t>& ids) {
  uint64_t n = 0;
  if (!readPod(in, n) || n > kMaxIds) return false;
  ids.clear();
  while (ids.size() < n) {
    size_t old = ids.size();
    size_t take = static_cast<size_t>(std::min<uint64_t>(kIdBlock, n - old));
    ids.resize(old + take);
    if (!in.read(reinterpret_cast<char*>(ids.data() + old), static_cast<std::streamsize>(take * sizeof(int32_t))))
      return false;
  }
  return std::all_of(ids.begin(), ids.end(),
                     [&](int32_t id) { return id >= 0 && static_cast<uint64_t>(id) < vocabSize; });
}

}  // namespace

void writeTokenCache(std::ostream& out, const std::vector<int64_t>& stamp, const Corpus& c) {
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
    out.write(reinterpret_cast<const char*>(ids->data()), static_cast<std::streamsize>(ids->size() * sizeof(int32_t)));
  }
}

bool readTokenCache(std::istream& in, const std::vector<int64_t>& stamp, Corpus& c) {
  char magic[8];
  uint32_t version = 0;
  if (!in.read(magic, 8) || std::memcmp(magic, kCacheMagic, 8) != 0) return false;
  if (!readPod(in, version) || version != kCacheVersion) return false;
  for (int64_t expected : stamp) {
    int64_t s;
    if (!readPod(in, s) || s != expected) return false;
  }
  uint64_t nWords = 0;
  if (!readPod(in, nWords) || nWords > kMaxWords) return false;
  std::vector<std::string> words;
  for (uint64_t k = 0; k < nWords; ++k) {
    uint32_t len = 0;
    if (!readPod(in, len) || len > kMaxWordBytes) return false;
    std::string w(len, '\0');
    if (!in.read(w.data(), len)) return false;
    words.push_back(std::move(w));
  }
  for (auto* ids : {&c.train, &c.valid, &c.test})
    if (!readIds(in, nWords, *ids)) return false;
  try {
    c.vocab = Vocabulary(std::move(words));
  } catch (const std::exception&) {
    return false;  // duplicate words or no <eos>: not something writeTokenCache produced
  }
  return true;
}

}  // namespace xtrap
