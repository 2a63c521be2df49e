#include "model/linear_bias_spec.h"

#include <cmath>
#include <limits>
#include <stdexcept>

namespace xtrap {

double LinearBiasSpec::bias(int64_t h, int64_t i, int64_t j, double firstTokenBias) const {
  if (hasFirstTokenBias && (i == 0 || j == 0)) return firstTokenBias;
  double b = 0.0;
  if (j < i) {
    if (blockPast[h]) return -std::numeric_limits<double>::infinity();
    b = -slopePast[h] * static_cast<double>(i - j);
  } else if (j > i) {
    if (blockFuture[h]) return -std::numeric_limits<double>::infinity();
    b = -slopeFuture[h] * (static_cast<double>(j - i) - futureShift);
  }
  return b;
}

std::vector<double> standardAlibiSlopes(int64_t heads) {
  if (heads < 1) throw std::invalid_argument("ALiBi needs at least one head");
  auto powerOfTwo = [](int64_t n) {
    double start = std::pow(2.0, -8.0 / static_cast<double>(n));
    std::vector<double> s(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) s[i] = std::pow(start, static_cast<double>(i + 1));
    return s;
  };
  int64_t closest = int64_t(1) << static_cast<int>(std::floor(std::log2(double(heads))));
  std::vector<double> slopes = powerOfTwo(closest);
  if (closest == heads) return slopes;
  std::vector<double> extra = powerOfTwo(2 * closest);
  for (int64_t i = 0; static_cast<int64_t>(slopes.size()) < heads; i += 2) slopes.push_back(extra[i]);
  return slopes;
}

std::vector<double> mptAlibiSlopes(int64_t heads, double biasMax) {
  if (heads < 1) throw std::invalid_argument("ALiBi needs at least one head");
  int64_t n = int64_t(1) << static_cast<int>(std::ceil(std::log2(double(heads))));
  std::vector<double> all(static_cast<size_t>(n));
  for (int64_t k = 1; k <= n; ++k) all[size_t(k - 1)] = std::pow(2.0, -double(k) * biasMax / double(n));
  if (n == heads) return all;
  std::vector<double> slopes;  // slopes[1::2] then slopes[::2] (0-based), the first H
  for (size_t i = 1; i < all.size(); i += 2) slopes.push_back(all[i]);
  for (size_t i = 0; i < all.size(); i += 2) slopes.push_back(all[i]);
  slopes.resize(static_cast<size_t>(heads));
  return slopes;
}

LinearBiasSpec makeLinearBiasSpec(PositionMethod method, int64_t heads, bool causal) {
  if (!isLinearBias(method)) throw std::invalid_argument(positionMethodName(method) + " is not an ALiBi-family method");
  if (causal && method != PositionMethod::Alibi)
    throw std::invalid_argument(positionMethodName(method) + " is an encoder variant; decoders use alibi");
  auto h = static_cast<size_t>(heads);
  LinearBiasSpec spec;
  spec.blockPast.assign(h, false);
  spec.blockFuture.assign(h, causal);
  std::vector<double> m = standardAlibiSlopes(heads);
  spec.slopePast = m;
  spec.slopeFuture = causal ? std::vector<double>(h, 0.0) : m;
  switch (method) {
    case PositionMethod::AlibiOffset:
      spec.futureShift = 0.5;
      break;
    case PositionMethod::AlibiOneSided: {
      if (heads % 2 != 0) throw std::invalid_argument("alibi-onesided needs an even number of heads");
      std::vector<double> half = standardAlibiSlopes(heads / 2);
      for (size_t k = 0; k < h; ++k) {
        bool pastHead = k < h / 2;
        double slope = half[pastHead ? k : k - h / 2];
        spec.slopePast[k] = pastHead ? slope : 0.0;
        spec.slopeFuture[k] = pastHead ? 0.0 : slope;
        spec.blockPast[k] = !pastHead;
        spec.blockFuture[k] = pastHead;
      }
      break;
    }
    case PositionMethod::AlibiLearned:
      spec.learnedSlopes = true;
      break;
    case PositionMethod::BiAlibi:
      spec.learnedSlopes = true;
      spec.hasFirstTokenBias = true;
      break;
    default:
      break;
  }
  return spec;
}

}  // namespace xtrap
