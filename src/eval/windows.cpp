#include "eval/windows.h"

#include <algorithm>
#include <stdexcept>

namespace xtrap {

std::vector<EvalWindow> decoderWindows(int64_t streamLength, int64_t Lvalid, int64_t stride) {
  if (Lvalid < 1 || stride < 1 || stride > Lvalid) throw std::invalid_argument("windows need 1 <= stride <= Lvalid");
  std::vector<EvalWindow> windows;
  int64_t inputs = streamLength;  // positions of x' = <eos> x that have a next token to predict
  int64_t covered = 0;            // predictions from inputs [0, covered) are scored
  for (int64_t s = 0; covered < inputs; s += stride) {
    int64_t T = std::min(Lvalid, inputs - s);
    windows.push_back({s, T, std::max<int64_t>(0, covered - s)});
    covered = s + T;
  }
  return windows;
}

}  // namespace xtrap

namespace xtrap {

std::vector<EvalWindow> encoderWindows(int64_t streamLength, int64_t Lvalid, int64_t stride) {
  if (Lvalid < 1 || stride < 1 || stride > Lvalid) throw std::invalid_argument("windows need 1 <= stride <= Lvalid");
  std::vector<EvalWindow> windows;
  for (int64_t s = 0; s < streamLength; s += stride) {
    windows.push_back({s, std::min(Lvalid, streamLength - s), 0});
    if (s + Lvalid >= streamLength) break;
  }
  return windows;
}

size_t bestEncoderWindow(const std::vector<EvalWindow>& windows, int64_t stride, int64_t p) {
  // Windows containing p have start in (p - length, p]; they are consecutive in the list.
  int64_t first = std::max<int64_t>(0, (p - windows.front().length + stride) / stride);
  size_t best = windows.size();
  int64_t bestMargin = -1;
  for (auto k = static_cast<size_t>(first); k < windows.size() && windows[k].start <= p; ++k) {
    const auto& w = windows[k];
    if (p >= w.start + w.length) continue;
    int64_t margin = std::min(p - w.start, w.start + w.length - 1 - p);
    if (margin > bestMargin) best = k, bestMargin = margin;
  }
  return best;
}

}  // namespace xtrap
