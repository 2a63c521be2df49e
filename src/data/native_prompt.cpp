#include "data/native_prompt.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <functional>
#include <random>
#include <sstream>
#include <stdexcept>

#include "util/fnv1a64.h"

namespace xtrap {

namespace {

constexpr std::string_view kLandmarkTask =
    "There is an important info hidden inside a lot of irrelevant text. Find it and memorize them. I will quiz you "
    "about the important information there.";
constexpr std::string_view kLandmarkGarbage =
    "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again.";
constexpr std::string_view kLandmarkQuestion = "What is the pass key? The pass key is";
constexpr std::string_view kLongEvalHeader =
    "Below is a record of lines I want you to remember. Each line begins with 'line <line index>' and contains a "
    "'<REGISTER_CONTENT>' at the end of the line as a numerical value. For each line index, memorize its "
    "corresponding <REGISTER_CONTENT>. At the end of the record, I will ask you to retrieve the corresponding "
    "<REGISTER_CONTENT> of a certain line index. Now the record start:\n\n";

int64_t uniformIn(std::mt19937_64& rng, int64_t lo, int64_t hi) {
  return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
}

std::vector<std::string> words(std::string_view list) {
  std::istringstream in{std::string(list)};
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

// The largest n in [0, hi] with fits(n), given fits(0) (fits is monotone: longer never fits better).
int64_t largestFitting(int64_t hi, const std::function<bool(int64_t)>& fits) {
  int64_t lo = 0;
  while (lo < hi) {
    int64_t mid = lo + (hi - lo + 1) / 2;
    if (fits(mid))
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

}  // namespace

NativePrompt buildNativePrompt(const Tokenizer& tokenizer, const PromptRequest& r) {
  if (r.task != RetrievalTask::Passkey && r.task != RetrievalTask::KvLines)
    throw std::invalid_argument("--format native builds passkey (Landmark's) and kv-lines (LongEval's) prompts; " +
                                retrievalTaskName(r.task) + " is asked in words (--format words)");
  if (!(r.depth >= 0 && r.depth <= 1)) throw std::invalid_argument("retrieval depth must be in [0, 1]");
  std::mt19937_64 rng(
      fnv1a64(fmt::format("native|{}|{}|{}|{:.9f}|{}", retrievalTaskName(r.task), r.seed, r.length, r.depth, r.trial)));
  auto tokens = [&](const std::string& text) { return tokenizer.encodeWithSpecialTokens(text); };
  auto tooShort = [&](int64_t minimum) {
    return std::invalid_argument(
        fmt::format("a native {} prompt needs at least {} tokens with this tokenizer; {} asked",
                    retrievalTaskName(r.task), minimum, r.length));
  };
  NativePrompt p;
  if (r.task == RetrievalTask::Passkey) {
    int64_t key = uniformIn(rng, 1, 50000);
    p.answer = std::to_string(key);
    std::string information = fmt::format("The pass key is {}. Remember it. {} is the pass key.", key, key);
    std::string garbage;
    while (int64_t(garbage.size()) < 8 * r.length + 64)  // more characters than any fitting prompt has
      garbage += (garbage.empty() ? "" : " ") + std::string(kLandmarkGarbage);
    auto prefixOf = [&](int64_t n) { return std::llround(r.depth * double(n)); };
    auto text = [&](int64_t n) {
      int64_t prefix = prefixOf(n);
      return std::string(kLandmarkTask) + "\n" + garbage.substr(0, size_t(prefix)) + "\n" + information + "\n" +
             garbage.substr(0, size_t(n - prefix)) + "\n" + std::string(kLandmarkQuestion);
    };
    int64_t shortest = int64_t(tokens(text(0)).size());
    if (shortest > r.length) throw tooShort(shortest);
    int64_t n = largestFitting(int64_t(garbage.size()),
                               [&](int64_t chars) { return int64_t(tokens(text(chars)).size()) <= r.length; });
    p.tokens = tokens(text(n));
    p.needleBegin =
        int64_t(tokens(std::string(kLandmarkTask) + "\n" + garbage.substr(0, size_t(prefixOf(n))) + "\n").size());
    return p;
  }
  // kv-lines: distinct adjective-noun names, as many lines as fit.
  std::vector<std::string> adjectives = words(retrievalKeyAdjectives()), nouns = words(retrievalKeyNouns());
  auto space = int64_t(adjectives.size() * nouns.size());
  std::vector<int64_t> order(static_cast<size_t>(space));
  for (int64_t k = 0; k < space; ++k) order[size_t(k)] = k;
  for (int64_t i = 0; i < space; ++i) std::swap(order[size_t(i)], order[size_t(uniformIn(rng, i, space - 1))]);
  std::vector<std::string> names;
  for (int64_t i = 0; i < space; ++i)
    names.push_back(adjectives[size_t(order[size_t(i)] / int64_t(nouns.size()))] + "-" +
                    nouns[size_t(order[size_t(i)] % int64_t(nouns.size()))]);
  std::vector<int64_t> values;
  for (int64_t i = 0; i < space; ++i) values.push_back(uniformIn(rng, 1, 50000));
  auto askedOf = [&](int64_t n) { return std::llround(r.depth * double(n - 1)); };
  auto record = [&](int64_t upTo) {
    std::string text(kLongEvalHeader);
    for (int64_t i = 0; i < upTo; ++i)
      text += fmt::format("line {}: REGISTER_CONTENT is <{}>\n", names[size_t(i)], values[size_t(i)]);
    return text;
  };
  auto text = [&](int64_t n) {
    const std::string& asked = names[size_t(askedOf(n))];
    return record(n) + fmt::format(
                           "\nNow the record is over. Tell me what is the <REGISTER_CONTENT> in line {}? I need the "
                           "number.Line <{}>: <REGISTER_CONTENT> is",
                           asked, asked);
  };
  int64_t shortest = int64_t(tokens(text(2)).size());
  if (shortest > r.length) throw tooShort(shortest);
  int64_t n =
      2 + largestFitting(space - 2, [&](int64_t extra) { return int64_t(tokens(text(2 + extra)).size()) <= r.length; });
  p.tokens = tokens(text(n));
  p.needleBegin = int64_t(tokens(record(askedOf(n))).size());
  p.answer = std::to_string(values[size_t(askedOf(n))]);
  p.lastInteger = true;
  return p;
}

std::string integerIn(const std::string& text, bool last) {
  std::string found;
  for (size_t i = 0; i < text.size();) {
    if (!std::isdigit(static_cast<unsigned char>(text[i]))) {
      ++i;
      continue;
    }
    size_t end = i;
    while (end < text.size() && std::isdigit(static_cast<unsigned char>(text[end]))) ++end;
    size_t digits = text.find_first_not_of('0', i);  // as an integer: no leading zeros
    found = digits < end ? text.substr(digits, end - digits) : "0";
    if (!last) return found;
    i = end;
  }
  return found;
}

int64_t itemsFound(const std::string& text, const std::vector<std::string>& items) {
  auto lower = [](std::string s) {
    for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
    return s;
  };
  std::string haystack = lower(text);
  int64_t found = 0;
  for (const auto& item : items) found += haystack.find(lower(item)) != std::string::npos ? 1 : 0;
  return found;
}

}  // namespace xtrap
