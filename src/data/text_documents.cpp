#include "data/text_documents.h"

#include <algorithm>

namespace xtrap {

namespace {

bool isSpace(char c) { return c == ' ' || c == '\t' || c == '\r'; }

}  // namespace

std::vector<TextDocument> headingDocuments(const std::vector<std::string>& pieces) {
  std::vector<TextDocument> documents;
  if (pieces.empty()) return documents;
  std::string text;
  std::vector<size_t> offsets;  // where each piece starts in `text`
  for (const auto& piece : pieces) {
    offsets.push_back(text.size());
    text += piece;
  }
  auto tokenAt = [&](size_t byte) {
    return int64_t(std::upper_bound(offsets.begin(), offsets.end(), byte) - offsets.begin()) - 1;
  };
  for (size_t lineStart = 0; lineStart < text.size();) {
    size_t lineEnd = text.find('\n', lineStart);
    if (lineEnd == std::string::npos) lineEnd = text.size();
    // "= Title =": the first "=" followed by a space and then anything but another "=".
    size_t at = lineStart;
    while (at < lineEnd && isSpace(text[at])) ++at;
    size_t next = at + 1;
    while (next < lineEnd && isSpace(text[next])) ++next;
    if (at + 1 < lineEnd && text[at] == '=' && isSpace(text[at + 1]) && next < lineEnd && text[next] != '=') {
      size_t titleEnd = lineEnd;
      while (titleEnd > next && isSpace(text[titleEnd - 1])) --titleEnd;
      if (titleEnd > next && text[titleEnd - 1] == '=') --titleEnd;  // the closing "="
      while (titleEnd > next && isSpace(text[titleEnd - 1])) --titleEnd;
      int64_t token = tokenAt(at);
      if (documents.empty() && token > 0) documents.push_back({0, ""});
      if (!documents.empty() && documents.back().firstToken == token)
        documents.back().title = text.substr(next, titleEnd - next);  // two headings in one token: the later
      else
        documents.push_back({token, text.substr(next, titleEnd - next)});
    }
    lineStart = lineEnd + 1;
  }
  if (documents.empty()) documents.push_back({0, ""});
  return documents;
}

int64_t documentOf(const std::vector<int64_t>& firstTokens, int64_t token) {
  return int64_t(std::upper_bound(firstTokens.begin(), firstTokens.end(), token) - firstTokens.begin()) - 1;
}

}  // namespace xtrap
