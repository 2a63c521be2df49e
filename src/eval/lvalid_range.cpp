#include "eval/lvalid_range.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace xtrap {
namespace {

[[noreturn]] void reject(const std::string& item, const std::string& why) {
  throw std::invalid_argument("bad --Lvalid item '" + item + "': " + why);
}

int64_t parseLength(const std::string& text, const std::string& item) {
  auto digit = [](char c) { return c >= '0' && c <= '9'; };  // ::isdigit is undefined for bytes >= 0x80
  if (text.empty() || text.size() > 9 || !std::all_of(text.begin(), text.end(), digit))
    reject(item, "expected a positive integer, got '" + text + "'");
  int64_t v = std::stoll(text);
  if (v < 1) reject(item, "lengths must be positive");
  if (v > kMaxLvalid) reject(item, "length above " + std::to_string(kMaxLvalid));
  return v;
}

double parseFactor(const std::string& text, const std::string& item) {
  size_t used = 0;
  double f = 0;
  try {
    f = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text.size() || !std::isfinite(f)) reject(item, "bad factor '" + text + "'");
  if (f <= 1.0 || f > 1e6) reject(item, "factor must be > 1");
  return f;
}

void expandItem(const std::string& item, std::vector<int64_t>& out) {
  size_t dots = item.find("..");
  if (dots == std::string::npos) {
    out.push_back(parseLength(item, item));
    return;
  }
  int64_t a = parseLength(item.substr(0, dots), item);
  std::string rest = item.substr(dots + 2);
  size_t op = rest.find_first_of(":*");
  int64_t b = parseLength(rest.substr(0, op), item);
  if (b < a) reject(item, "range is descending");
  if (op == std::string::npos) {
    for (int64_t v = a; v < b; v *= 2) out.push_back(v);
  } else if (rest[op] == ':') {
    int64_t step = parseLength(rest.substr(op + 1), item);
    if ((b - a) / step > 100000) reject(item, "more than 100000 lengths");
    for (int64_t v = a; v < b; v += step) out.push_back(v);
  } else {
    double f = parseFactor(rest.substr(op + 1), item);
    // A factor just above 1 (e.g. 1.000000000001) would loop ~1e13 times before reaching B.
    if (std::log(double(b) / double(a)) / std::log(f) > 100000) reject(item, "more than 100000 lengths");
    int64_t last = -1;
    for (double v = double(a); v < double(b); v *= f) {
      auto r = static_cast<int64_t>(std::llround(v));
      if (r != last && r < b) out.push_back(r);
      last = r;
    }
  }
  out.push_back(b);
}

}  // namespace

std::vector<std::string> rangeItems(const std::string& spec, const std::string& option) {
  std::vector<std::string> items;
  size_t begin = 0;
  while (true) {
    size_t comma = spec.find(',', begin);
    items.push_back(spec.substr(begin, comma == std::string::npos ? std::string::npos : comma - begin));
    if (items.back().empty()) throw std::invalid_argument("bad " + option + " item '" + spec + "': empty item");
    if (comma == std::string::npos) return items;
    begin = comma + 1;
  }
}

std::vector<int64_t> parseLvalidRange(const std::string& spec) {
  std::vector<int64_t> out;
  for (const std::string& item : rangeItems(spec, "--Lvalid")) expandItem(item, out);
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

}  // namespace xtrap
