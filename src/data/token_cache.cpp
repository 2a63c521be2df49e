#include "data/token_cache.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "util/fnv1a64.h"

namespace xtrap {
namespace {

constexpr char kCacheMagic[8] = {'X', 'T', 'R', 'A', 'P', 'T', 'O', 'K'};
constexpr uint32_t kCacheVersion = 2;  // 1: a stream of vectors, stamped with sizes and mtimes only
constexpr uint32_t kMaxWordBytes = 1u << 20;

struct Header {
  char magic[8];
  uint32_t version;
  uint32_t reserved;
  uint64_t sourceBytes[3];
  uint64_t sourceContentHash;
  uint64_t corpusDigest;  // the number in corpusDigest()'s "fnv1a64:<hex>"
  uint64_t payloadChecksum;
  uint64_t wordCount;
  uint64_t vocabBytes;
  uint64_t splitLengths[3];
};
static_assert(sizeof(Header) == kTokenCacheHeaderBytes, "the header is 104 bytes on disk");

uint64_t paddedVocabBytes(uint64_t vocabBytes) { return (vocabBytes + 3) / 4 * 4; }

std::string vocabBlock(const Vocabulary& vocab) {
  std::string block;
  for (const auto& w : vocab.words()) {
    block += w;
    block += '\0';
  }
  block.resize(paddedVocabBytes(block.size()), '\0');
  return block;
}

std::string_view bytesOf(TokenSpan ids) {
  return {reinterpret_cast<const char*>(ids.data()), ids.size() * sizeof(int32_t)};
}

// Words of a vocabulary block, or an empty vector when the block is not `count` '\0'-terminated words.
std::vector<std::string> parseWords(std::string_view block, uint64_t count) {
  std::vector<std::string> words;
  size_t pos = 0;
  for (uint64_t k = 0; k < count; ++k) {
    size_t end = block.find('\0', pos);
    if (end == std::string_view::npos || end - pos > kMaxWordBytes) return {};
    words.emplace_back(block.substr(pos, end - pos));
    pos = end + 1;
  }
  return words;
}

}  // namespace

void writeTokenCache(std::ostream& out, const SourceStamp& stamp, const Corpus& c) {
  std::string vocab = vocabBlock(c.vocab);
  Header h{};
  std::memcpy(h.magic, kCacheMagic, sizeof(kCacheMagic));
  h.version = kCacheVersion;
  for (size_t s = 0; s < 3; ++s) h.sourceBytes[s] = stamp.bytes[s];
  h.sourceContentHash = stamp.contentHash;
  h.corpusDigest = std::stoull(c.digest.substr(c.digest.find(':') + 1), nullptr, 16);
  h.wordCount = uint64_t(c.vocab.size());
  h.vocabBytes = vocab.size();
  uint64_t checksum = fnv1a64(vocab);
  int s = 0;
  for (TokenSpan split : {c.train, c.valid, c.test}) {
    h.splitLengths[s++] = split.size();
    checksum = fnv1a64(bytesOf(split), checksum);
  }
  h.payloadChecksum = checksum;
  out.write(reinterpret_cast<const char*>(&h), sizeof(h));
  out.write(vocab.data(), static_cast<std::streamsize>(vocab.size()));
  for (TokenSpan split : {c.train, c.valid, c.test})
    out.write(bytesOf(split).data(), static_cast<std::streamsize>(bytesOf(split).size()));
}

std::string readTokenCache(std::string_view bytes, const SourceStamp& stamp, const PayloadReader& payload, Corpus& c) {
  Header h{};
  if (bytes.size() < sizeof(h)) return "damaged: shorter than its header";
  std::memcpy(&h, bytes.data(), sizeof(h));
  if (std::memcmp(h.magic, kCacheMagic, sizeof(kCacheMagic)) != 0) return "damaged: not an xtrap token cache";
  if (h.version != kCacheVersion) return "written by another xtrap version";
  for (size_t s = 0; s < 3; ++s)
    if (h.sourceBytes[s] != stamp.bytes[s]) return "made from other data";
  if (h.sourceContentHash != stamp.contentHash) return "made from other data";

  // Sizes in the order they are laid out, each checked before it is added so nothing overflows.
  uint64_t size = bytes.size() - sizeof(h);
  if (h.vocabBytes > size) return "damaged: truncated";
  uint64_t idsBytes = size - paddedVocabBytes(h.vocabBytes);
  uint64_t ids = 0;
  for (uint64_t n : h.splitLengths) {
    if (n > idsBytes / 4 - ids) return "damaged: truncated";
    ids += n;
  }
  if (paddedVocabBytes(h.vocabBytes) + ids * 4 != size) return "damaged: wrong size";
  std::vector<std::string> words = parseWords(bytes.substr(sizeof(h), h.vocabBytes), h.wordCount);
  if (words.empty()) return "damaged: bad vocabulary";

  // One pass over the payload: checksum, and every id a word of the vocabulary.
  uint64_t checksum = kFnv1a64Basis, offset = 0, idsStart = paddedVocabBytes(h.vocabBytes);
  bool inRange = true;
  payload([&](std::string_view block) {
    checksum = fnv1a64(block, checksum);
    // Blocks start at multiples of 4 past idsStart (both are multiples of 4), so ids never straddle.
    uint64_t from = offset < idsStart ? std::min<uint64_t>(idsStart - offset, block.size()) : 0;
    for (uint64_t k = from; k + 4 <= block.size(); k += 4) {
      int32_t id;
      std::memcpy(&id, block.data() + k, 4);
      inRange = inRange && id >= 0 && uint64_t(id) < h.wordCount;
    }
    offset += block.size();
  });
  if (checksum != h.payloadChecksum) return "damaged: checksum mismatch";
  if (!inRange) return "damaged: an id outside the vocabulary";
  try {
    c.vocab = Vocabulary(std::move(words));
  } catch (const std::exception&) {
    return "damaged: bad vocabulary";  // duplicate words or no <eos>: not something writeTokenCache produced
  }
  const char* idBase = bytes.data() + sizeof(h) + idsStart;
  // The mapping is page-aligned and idsStart a multiple of 4: the ids are int32-aligned.
  const auto* first = reinterpret_cast<const int32_t*>(idBase);
  c.train = TokenSpan(first, h.splitLengths[0]);
  c.valid = TokenSpan(first + h.splitLengths[0], h.splitLengths[1]);
  c.test = TokenSpan(first + h.splitLengths[0] + h.splitLengths[1], h.splitLengths[2]);
  c.digest = fmt::format("fnv1a64:{:016x}", h.corpusDigest);
  return "";
}

PayloadReader payloadOf(std::string_view bytes) {
  return [bytes](const std::function<void(std::string_view)>& onBlock) {
    if (bytes.size() > kTokenCacheHeaderBytes) onBlock(bytes.substr(kTokenCacheHeaderBytes));
  };
}

}  // namespace xtrap
