#include "eval/depth_list.h"

#include <algorithm>
#include <stdexcept>

#include "eval/lvalid_range.h"

namespace xtrap {
namespace {

[[noreturn]] void reject(const std::string& item, const std::string& why) {
  throw std::invalid_argument("bad --depths item '" + item + "': " + why);
}

int parsePercent(const std::string& text, const std::string& item) {
  auto digit = [](char c) { return c >= '0' && c <= '9'; };
  if (text.empty() || text.size() > 3 || !std::all_of(text.begin(), text.end(), digit))
    reject(item, "expected a whole percent 0..100, got '" + text + "'");
  int v = std::stoi(text);
  if (v > 100) reject(item, "depths are percent of the prompt, at most 100");
  return v;
}

}  // namespace

std::vector<double> parseDepthList(const std::string& spec) {
  std::vector<double> out;
  for (const std::string& item : rangeItems(spec, "--depths")) {
    size_t dots = item.find("..");
    if (dots == std::string::npos) {
      out.push_back(parsePercent(item, item));
    } else {
      std::string rest = item.substr(dots + 2);
      size_t colon = rest.find(':');
      if (colon == std::string::npos) reject(item, "a range needs a step (A..B:s)");
      int a = parsePercent(item.substr(0, dots), item), b = parsePercent(rest.substr(0, colon), item);
      int step = parsePercent(rest.substr(colon + 1), item);
      if (b < a) reject(item, "range is descending");
      if (step < 1) reject(item, "step must be >= 1");
      for (int v = a; v < b; v += step) out.push_back(v);
      out.push_back(b);
    }
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

}  // namespace xtrap
