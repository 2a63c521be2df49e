#pragma once
// The Wilson score interval of a binomial proportion (Wilson 1927): the interval retrieval
// accuracies are reported with. Unlike the normal approximation p +- z sqrt(p(1-p)/n) it stays
// inside [0, 1] and is not empty at 0 or n successes, where retrieval cells often sit.
#include <cstdint>

namespace xtrap {

struct ProportionInterval {
  double low = 0, high = 1;
};

// successes of trials (trials >= 1), z = 1.959964 for 95%.
ProportionInterval wilsonInterval(int64_t successes, int64_t trials, double z = 1.959963984540054);

}  // namespace xtrap
