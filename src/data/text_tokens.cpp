#include "data/text_tokens.h"

#include <fmt/format.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "data/text_checks.h"
#include "data/unicode_regex.h"
#include "data/wikitext_detokenizer.h"
#include "util/fnv1a64.h"

namespace xtrap {
namespace fs = std::filesystem;

namespace {
constexpr char kMagic[8] = {'X', 'T', 'R', 'A', 'P', 'B', 'P', 'E'};
constexpr uint64_t kVersion = 1;
constexpr size_t kHeaderBytes = 8 + 4 * 8;

void putU64(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
uint64_t getU64(std::string_view in, size_t at) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(in[at + size_t(i)]);
  return v;
}

std::string readFile(const fs::path& file) {
  // A directory opens as a stream of nothing, which would read as an empty text.
  if (fs::is_directory(file)) throw std::runtime_error(file.string() + " is a directory, not a text file");
  std::ifstream in(file, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + file.string());
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// The cached ids when the cache matches the text and the tokenizer; else nothing.
bool readCache(const fs::path& cache, std::string_view text, uint64_t hash, int32_t vocab, std::vector<int32_t>& ids) {
  std::ifstream in(cache, std::ios::binary);
  if (!in) return false;
  std::ostringstream s;
  s << in.rdbuf();
  std::string bytes = s.str();
  if (bytes.size() < kHeaderBytes || std::memcmp(bytes.data(), kMagic, 8) != 0 || getU64(bytes, 8) != kVersion ||
      getU64(bytes, 16) != text.size() || getU64(bytes, 24) != hash)
    return false;
  uint64_t count = getU64(bytes, 32);
  if (count > (bytes.size() - kHeaderBytes) / 4 || bytes.size() != kHeaderBytes + 4 * count) return false;
  ids.resize(count);
  std::memcpy(ids.data(), bytes.data() + kHeaderBytes, 4 * count);
  for (int32_t id : ids)
    if (id < 0 || id >= vocab) return false;
  return true;
}

void writeCache(const fs::path& cache, std::string_view text, uint64_t hash, const std::vector<int32_t>& ids) {
  std::string out(kMagic, 8);
  putU64(out, kVersion);
  putU64(out, text.size());
  putU64(out, hash);
  putU64(out, ids.size());
  out.append(reinterpret_cast<const char*>(ids.data()), 4 * ids.size());
  fs::path tmp = cache;
  tmp += ".tmp";
  std::ofstream f(tmp, std::ios::binary);
  if (!f.write(out.data(), std::streamsize(out.size()))) return;  // unwritable: no cache
  f.close();
  std::error_code ec;
  fs::rename(tmp, cache, ec);
  if (ec) fs::remove(tmp, ec);
}
}  // namespace

TextCounts countText(std::string_view text) {
  TextCounts c;
  c.bytes = int64_t(text.size());
  bool inWord = false;
  for (char ch : text) {
    bool space = ch == ' ' || ch == '\t' || ch == '\r' || ch == '\n';
    if (!space && !inWord) ++c.words;
    inWord = !space;
    if (ch == '\n') ++c.words;
  }
  if (!text.empty() && text.back() != '\n') ++c.words;  // the last line's end
  return c;
}

TextCounts harnessPageCounts(std::string_view page) {
  // Python's Unicode \s: Unicode's White_Space (UnicodeRegex's \s) and the separators \x1c-\x1f.
  static const UnicodeRegex pythonSpaces("[\\s\\x{1C}-\\x{1F}]+");
  TextCounts c;
  c.bytes = int64_t(page.size());
  c.words = 1 + int64_t(pythonSpaces.findAll(page).size());  // re.split: one piece more than separators
  return c;
}

TokenizedText tokenizeTextFile(const TextSource& source, const Tokenizer& tokenizer) {
  const fs::path& file = source.file;
  std::string text = readFile(file);
  if (text.empty()) throw std::runtime_error(file.string() + " is empty");
  size_t bad = firstInvalidUtf8(text);
  if (bad != std::string_view::npos)
    throw std::runtime_error(fmt::format("{}: invalid UTF-8 at byte {}", file.string(), bad));
  TokenizedText out;
  out.counts = countText(text);
  if (source.detokenize) text = detokenizeWikiText(text);
  uint64_t hash = fnv1a64(text);
  std::string digest = tokenizer.digest();
  fs::path cache = file;
  cache += fmt::format(".xtrap-bpe-{}code{}-{}.bin", source.detokenize ? "detok-" : "", Tokenizer::kCodeVersion,
                       digest.substr(digest.find(':') + 1));
  if (readCache(cache, text, hash, tokenizer.vocabSize(), out.ids)) return out;
  out.ids = tokenizer.encode(text);
  writeCache(cache, text, hash, out.ids);
  return out;
}

TextSource wikiTextSplitSource(const fs::path& dir, const std::string& split, bool wordLevel) {
  fs::path tokens = dir / ("wiki." + split + ".tokens");
  if (wordLevel) return {tokens, false};
  fs::path raw = dir / ("wiki." + split + ".raw");
  if (fs::exists(raw)) return {raw, false};
  return {tokens, true};
}

}  // namespace xtrap
