#include "data/wikitext.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <fstream>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <unordered_map>

#include "data/corpus_digest.h"
#include "data/text_checks.h"
#include "data/token_cache.h"
#include "util/atomic_file.h"
#include "util/fnv1a64.h"
#include "util/mapped_file.h"
#include "util/progress_bar.h"

namespace xtrap {
namespace fs = std::filesystem;

namespace {

const char* kSplits[3] = {"train", "valid", "test"};
// Files at least this large show parsing progress (WikiText-2's train split, 11 MB, parses in
// about a second; WikiText-103's, 540 MB, in about a minute).
constexpr size_t kProgressBytes = size_t(64) << 20;

fs::path splitPath(const fs::path& dir, const char* split) { return dir / (std::string("wiki.") + split + ".tokens"); }

// Sizes and content hash of the three files, read with pread (no mapped page stays resident).
SourceStamp stampSources(const fs::path& dir) {
  SourceStamp stamp;
  stamp.contentHash = kFnv1a64Basis;
  for (size_t s = 0; s < 3; ++s) {
    MappedFile file(splitPath(dir, kSplits[s]));
    stamp.bytes[s] = file.bytes().size();
    file.readFrom(0, [&](std::string_view block) { stamp.contentHash = fnv1a64(block, stamp.contentHash); });
  }
  return stamp;
}

// Line-aligned pieces of `text`, a few per thread so that uneven pieces still keep every thread busy.
std::vector<std::string_view> lineChunks(std::string_view text, size_t threads) {
  size_t want = std::max<size_t>(1, std::min(threads * 4, text.size() / (size_t(1) << 16)));
  std::vector<std::string_view> chunks;
  for (size_t k = 1, start = 0; k <= want && start < text.size(); ++k) {
    size_t end = text.size();
    if (k < want) {
      size_t lineEnd = text.find('\n', std::max(start, text.size() * k / want));
      if (lineEnd != std::string_view::npos) end = lineEnd + 1;
    }
    chunks.push_back(text.substr(start, end - start));
    start = end;
  }
  return chunks;
}

size_t parseThreads() { return std::max(1u, std::thread::hardware_concurrency()); }

// Runs work(k) for k in [0, n) on every hardware thread; progress counts bytes of chunk k (sizes[k]).
template <typename Work>
void forEachChunk(const std::vector<std::string_view>& chunks, const ParseProgress& progress, Work&& work) {
  std::atomic<size_t> next{0};
  size_t total = 0, done = 0;
  for (auto c : chunks) total += c.size();
  std::mutex progressMutex;
  std::exception_ptr failure;
  auto worker = [&] {
    try {
      for (size_t k; (k = next++) < chunks.size();) {
        work(k);
        std::lock_guard<std::mutex> lock(progressMutex);
        done += chunks[k].size();
        if (progress) progress(done, total);
      }
    } catch (...) {
      std::lock_guard<std::mutex> lock(progressMutex);
      failure = std::current_exception();
    }
  };
  std::vector<std::thread> threads;
  for (size_t t = 1; t < std::min(parseThreads(), chunks.size()); ++t) threads.emplace_back(worker);
  worker();
  for (auto& t : threads) t.join();
  if (failure) std::rethrow_exception(failure);
}

// One line on stderr per phase when the text is large enough for parsing to take a while.
ParseProgress progressFor(const std::string& label, size_t bytes) {
  if (bytes < kProgressBytes) return {};
  auto bar = std::make_shared<ProgressBar>(label, int64_t(bytes >> 20));
  return [bar](size_t done, size_t total) {
    if (done == total)
      bar->finish();
    else
      bar->update(int64_t(done >> 20), "MiB");
  };
}

// An exclusive flock(2) on DIR/.xtrap-cache.lock while the cache is checked and (re)built, so that
// ranks loading one directory at once parse it once. None (and no cache written) if the directory
// is not writable.
class CacheLock {
 public:
  explicit CacheLock(const fs::path& dir) {
    fd_ = ::open((dir / ".xtrap-cache.lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ >= 0) {
      while (::flock(fd_, LOCK_EX) != 0 && errno == EINTR) {
      }
    }
  }
  ~CacheLock() {
    if (fd_ >= 0) ::close(fd_);  // closing releases the lock
  }
  CacheLock(const CacheLock&) = delete;
  CacheLock& operator=(const CacheLock&) = delete;

 private:
  int fd_ = -1;
};

// Parses the three split files (checked first) into a corpus that owns its ids.
Corpus parseSplits(const fs::path& dir) {
  std::vector<std::unique_ptr<MappedFile>> files;
  std::vector<std::string_view> texts;
  for (const char* s : kSplits) {
    auto p = splitPath(dir, s);
    files.push_back(std::make_unique<MappedFile>(p));
    texts.push_back(files.back()->bytes());
    checkCorpusText(texts.back(), p.string());
  }
  std::string name = splitPath(dir, "train").filename().string();
  Vocabulary vocab = buildVocabulary(texts[0], progressFor("counting words in " + name, texts[0].size()));
  std::vector<std::vector<int32_t>> ids;
  for (size_t s = 0; s < 3; ++s) {
    std::string file = splitPath(dir, kSplits[s]).filename().string();
    ids.push_back(tokenize(texts[s], vocab, progressFor("tokenizing " + file, texts[s].size())));
  }
  Corpus c = Corpus::fromIds(std::move(vocab), std::move(ids[0]), std::move(ids[1]), std::move(ids[2]));
  c.dir = dir;
  return c;
}

// The cache's corpus (its splits viewing the mapped file), or why it cannot be used ("" if absent).
std::string openCache(const fs::path& file, const fs::path& dir, const SourceStamp& stamp, Corpus& c) {
  if (!fs::exists(file)) return "";
  std::shared_ptr<MappedFile> mapped;
  try {
    mapped = std::make_shared<MappedFile>(file);
  } catch (const std::exception& e) {
    return e.what();
  }
  auto payload = [&](const std::function<void(std::string_view)>& onBlock) {
    mapped->readFrom(kTokenCacheHeaderBytes, onBlock);
  };
  std::string problem = readTokenCache(mapped->bytes(), stamp, payload, c);
  if (problem.empty()) {
    for (TokenSpan* split : {&c.train, &c.valid, &c.test})
      *split =
          split->readingThrough(mapped.get(), reinterpret_cast<const char*>(split->data()) - mapped->bytes().data());
    c.dir = dir;
    c.storage = mapped;
  }
  return problem;
}

}  // namespace

const TokenSpan& Corpus::split(const std::string& name) const {
  if (name == "train") return train;
  if (name == "valid") return valid;
  if (name == "test") return test;
  throw std::runtime_error("unknown split '" + name + "' (expected train, valid or test)");
}

Corpus Corpus::fromIds(Vocabulary vocab, std::vector<int32_t> train, std::vector<int32_t> valid,
                       std::vector<int32_t> test) {
  auto owned = std::make_shared<std::array<std::vector<int32_t>, 3>>();
  (*owned)[0] = std::move(train);
  (*owned)[1] = std::move(valid);
  (*owned)[2] = std::move(test);
  Corpus c;
  c.vocab = std::move(vocab);
  c.train = (*owned)[0];
  c.valid = (*owned)[1];
  c.test = (*owned)[2];
  c.digest = corpusDigest(c.vocab, c.train, c.valid, c.test);
  c.storage = owned;
  return c;
}

Vocabulary buildVocabulary(std::string_view trainText, const ParseProgress& progress) {
  struct Entry {
    int64_t count = 0;
    int64_t first = 0;  // token index of the first appearance (within the chunk, then overall)
  };
  auto chunks = lineChunks(trainText, parseThreads());
  std::vector<std::unordered_map<std::string_view, Entry>> counts(chunks.size());
  std::vector<int64_t> chunkTokens(chunks.size(), 0);
  forEachChunk(chunks, progress, [&](size_t k) {
    int64_t order = 0;
    forEachWikiTextToken(chunks[k], [&](std::string_view w) {
      auto [it, inserted] = counts[k].try_emplace(w);
      if (inserted) it->second.first = order;
      ++it->second.count;
      ++order;
    });
    chunkTokens[k] = order;
  });
  std::unordered_map<std::string_view, Entry> merged = std::move(counts[0]);
  int64_t offset = chunkTokens[0];
  for (size_t k = 1; k < chunks.size(); ++k) {
    for (const auto& [w, e] : counts[k]) {
      auto [it, inserted] = merged.try_emplace(w, Entry{0, offset + e.first});
      it->second.count += e.count;
    }
    counts[k].clear();
    offset += chunkTokens[k];
  }
  std::vector<std::pair<std::string_view, Entry>> sorted(merged.begin(), merged.end());
  std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) {
    if (a.second.count != b.second.count) return a.second.count > b.second.count;
    return a.second.first < b.second.first;
  });
  std::vector<std::string> words;
  words.reserve(sorted.size());
  for (const auto& [w, e] : sorted) words.emplace_back(w);
  return Vocabulary(std::move(words));
}

std::vector<int32_t> tokenize(std::string_view text, const Vocabulary& vocab, const ParseProgress& progress) {
  // Looking words up through a string_view-keyed map avoids one std::string per token.
  std::unordered_map<std::string_view, int32_t> fast;
  fast.reserve(static_cast<size_t>(vocab.size()) * 2);
  for (int32_t i = 0; i < vocab.size(); ++i) fast.emplace(vocab.word(i), i);
  auto chunks = lineChunks(text, parseThreads());
  std::vector<std::vector<int32_t>> pieces(chunks.size());
  forEachChunk(chunks, progress, [&](size_t k) {
    pieces[k].reserve(chunks[k].size() / 5);
    forEachWikiTextToken(chunks[k], [&](std::string_view w) {
      auto it = fast.find(w);
      pieces[k].push_back(it == fast.end() ? vocab.unk() : it->second);
    });
  });
  size_t total = 0;
  for (const auto& p : pieces) total += p.size();
  std::vector<int32_t> ids;
  ids.reserve(total);
  for (auto& p : pieces) {
    ids.insert(ids.end(), p.begin(), p.end());
    std::vector<int32_t>().swap(p);
  }
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
  auto cacheFile = dir / ".xtrap-cache.bin";
  CacheLock lock(dir);
  SourceStamp stamp = stampSources(dir);
  Corpus c;
  std::string problem = openCache(cacheFile, dir, stamp, c);
  if (c.storage) return c;
  if (!problem.empty()) fmt::print(stderr, "xtrap: rebuilding the token cache {} ({})\n", cacheFile.string(), problem);

  Corpus parsed = parseSplits(dir);
  try {
    writeFileAtomically(cacheFile, [&](std::ostream& out) { writeTokenCache(out, stamp, parsed); });
  } catch (const std::exception&) {
    return parsed;  // read-only data directory: no cache, this corpus keeps its own ids
  }
  // Serve the ids from the mapped cache just written, so the parsed copy's memory goes back now.
  Corpus cached;
  if (openCache(cacheFile, dir, stamp, cached).empty() && cached.storage) return cached;
  return parsed;
}

fs::path defaultDataDir() {
  // Installed next to the binary's source tree: XTRAP_DATA_DIR is set by CMake at build time.
  return fs::path(XTRAP_DEFAULT_DATA_DIR);
}

}  // namespace xtrap
