#include "data/token_decoder.h"

#include "data/byte_level.h"
#include "data/text_checks.h"

namespace xtrap {
namespace {

// The characters of valid UTF-8 `s`.
std::vector<char32_t> characters(const std::string& s) {
  std::vector<char32_t> out;
  for (size_t i = 0; i < s.size();) {
    const auto lead = static_cast<unsigned char>(s[i]);
    const size_t length = lead < 0x80 ? 1 : (lead >> 5) == 0x6 ? 2 : (lead >> 4) == 0xE ? 3 : 4;
    char32_t c = length == 1 ? lead : lead & (0x7F >> length);
    for (size_t k = 1; k < length; ++k) c = (c << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
    out.push_back(c);
    i += length;
  }
  return out;
}

void appendUtf8(char32_t c, std::string& out) {
  if (c < 0x80) {
    out += static_cast<char>(c);
  } else if (c < 0x800) {
    out += {static_cast<char>(0xC0 | (c >> 6)), static_cast<char>(0x80 | (c & 0x3F))};
  } else if (c < 0x10000) {
    out += {static_cast<char>(0xE0 | (c >> 12)), static_cast<char>(0x80 | ((c >> 6) & 0x3F)),
            static_cast<char>(0x80 | (c & 0x3F))};
  } else {
    out += {static_cast<char>(0xF0 | (c >> 18)), static_cast<char>(0x80 | ((c >> 12) & 0x3F)),
            static_cast<char>(0x80 | ((c >> 6) & 0x3F)), static_cast<char>(0x80 | (c & 0x3F))};
  }
}

// The byte a token "<0xHH>" names (either case of hex digit, as Rust's from_str_radix), or -1.
int fallbackByte(const std::string& token) {
  if (token.size() != 6 || token.compare(0, 3, "<0x") != 0 || token[5] != '>') return -1;
  int value = 0;
  for (size_t i = 3; i < 5; ++i) {
    const char c = token[i];
    const int digit = c >= '0' && c <= '9'   ? c - '0'
                      : c >= 'a' && c <= 'f' ? c - 'a' + 10
                      : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                             : -1;
    if (digit < 0) return -1;
    value = value * 16 + digit;
  }
  return value;
}

const char kReplacementCharacter[] = "\xEF\xBF\xBD";

std::vector<std::string> byteFallback(std::vector<std::string> tokens) {
  std::vector<std::string> out;
  std::string bytes;
  auto flush = [&] {
    if (bytes.empty()) return;
    if (firstInvalidUtf8(bytes) == std::string_view::npos)
      out.push_back(bytes);
    else
      out.insert(out.end(), bytes.size(), kReplacementCharacter);
    bytes.clear();
  };
  for (std::string& token : tokens) {
    const int byte = fallbackByte(token);
    if (byte >= 0) {
      bytes += static_cast<char>(byte);
      continue;
    }
    flush();
    out.push_back(std::move(token));
  }
  flush();
  return out;
}

// The WordPiece decoder's cleanup (decoders/wordpiece.rs): each replacement over the whole
// token, in this order.
std::string wordPieceCleanup(std::string token) {
  static const std::pair<const char*, const char*> kReplacements[] = {
      {" .", "."},   {" ?", "?"},           {" !", "!"},   {" ,", ","},     {" ' ", "'"},   {" n't", "n't"},
      {" 'm", "'m"}, {" do not", " don't"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}};
  for (const auto& [from, to] : kReplacements) {
    std::string out;
    const std::string_view needle(from);
    for (size_t at = 0;;) {
      size_t found = token.find(needle, at);
      out.append(token, at, found == std::string::npos ? std::string::npos : found - at);
      if (found == std::string::npos) break;
      out += to;
      at = found + needle.size();
    }
    token = std::move(out);
  }
  return token;
}

}  // namespace

void TokenDecoder::addByteLevel() { steps_.push_back({Step::ByteLevel}); }

void TokenDecoder::addReplace(std::shared_ptr<const UnicodeRegex> regex, const std::string& content) {
  Step step{Step::Replace, std::move(regex)};
  for (char c : content) step.content += c == '$' ? std::string("$$") : std::string(1, c);
  steps_.push_back(std::move(step));
}

void TokenDecoder::addByteFallback() { steps_.push_back({Step::ByteFallback}); }

void TokenDecoder::addFuse() { steps_.push_back({Step::Fuse}); }
void TokenDecoder::addSpaceJoin() { steps_.push_back({Step::SpaceJoin}); }

void TokenDecoder::addStrip(char32_t character, size_t start, size_t stop) {
  Step step{Step::Strip};
  step.character = character;
  step.start = start;
  step.stop = stop;
  steps_.push_back(std::move(step));
}

void TokenDecoder::addWordPiece(std::string prefix, bool cleanup) {
  Step step{Step::WordPiece};
  step.content = std::move(prefix);
  step.cleanup = cleanup;
  steps_.push_back(std::move(step));
}

void TokenDecoder::addMetaspace(char32_t replacement, bool stripFirst) {
  Step step{Step::Metaspace};
  step.character = replacement;
  step.stripFirst = stripFirst;
  steps_.push_back(std::move(step));
}

std::string TokenDecoder::decode(std::vector<std::string> tokens) const {
  for (const Step& step : steps_) {
    switch (step.kind) {
      case Step::ByteLevel: {
        std::string bytes;
        for (const std::string& token : tokens) bytes += byteLevelToBytes(token);
        tokens = {utf8Lossy(bytes)};
        break;
      }
      case Step::Replace:
        for (std::string& token : tokens) token = step.regex->replaceAll(token, step.content);
        break;
      case Step::ByteFallback:
        tokens = byteFallback(std::move(tokens));
        break;
      case Step::SpaceJoin:
      case Step::Fuse: {
        std::string all;
        for (const std::string& token : tokens)
          all += (step.kind == Step::SpaceJoin && &token != &tokens.front() ? " " : "") + token;
        tokens = {std::move(all)};
        break;
      }
      case Step::Strip:
        for (std::string& token : tokens) {
          const std::vector<char32_t> chars = characters(token);
          size_t begin = 0, end = chars.size();
          while (begin < step.start && begin < end && chars[begin] == step.character) ++begin;
          while (chars.size() - end < step.stop && end > begin && chars[end - 1] == step.character) --end;
          token.clear();
          for (size_t i = begin; i < end; ++i) appendUtf8(chars[i], token);
        }
        break;
      case Step::WordPiece:
        for (size_t t = 0; t < tokens.size(); ++t) {
          std::string& token = tokens[t];
          if (t != 0) {
            if (token.compare(0, step.content.size(), step.content) == 0)
              token.erase(0, step.content.size());
            else
              token.insert(0, " ");
          }
          if (step.cleanup) token = wordPieceCleanup(token);
        }
        break;
      case Step::Metaspace:
        for (size_t t = 0; t < tokens.size(); ++t) {
          std::string decoded;
          for (char32_t c : characters(tokens[t])) {
            if (c != step.character)
              appendUtf8(c, decoded);
            else if (t != 0 || !step.stripFirst)
              decoded += ' ';
          }
          tokens[t] = std::move(decoded);
        }
        break;
    }
  }
  std::string text;
  for (const std::string& token : tokens) text += token;
  return text;
}

}  // namespace xtrap
