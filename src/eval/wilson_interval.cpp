#include "eval/wilson_interval.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace xtrap {

ProportionInterval wilsonInterval(int64_t successes, int64_t trials, double z) {
  if (trials < 1 || successes < 0 || successes > trials)
    throw std::invalid_argument("wilsonInterval: need 0 <= successes <= trials, trials >= 1");
  double n = double(trials), p = double(successes) / n, z2 = z * z;
  double center = (p + z2 / (2 * n)) / (1 + z2 / n);
  double half = z * std::sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / (1 + z2 / n);
  // At 0 (n) successes the bound is exactly 0 (1); rounding would leave it a few ulps off.
  return {successes == 0 ? 0.0 : std::max(0.0, center - half),
          successes == trials ? 1.0 : std::min(1.0, center + half)};
}

}  // namespace xtrap
