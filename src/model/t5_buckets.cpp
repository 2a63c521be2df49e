#include "model/t5_buckets.h"

#include <algorithm>
#include <cmath>

namespace xtrap {

int64_t t5RelativeBucket(int64_t relative, bool bidirectional, int64_t numBuckets, int64_t maxDistance) {
  int64_t bucket = 0;
  int64_t n;  // distance >= 0
  if (bidirectional) {
    numBuckets /= 2;
    if (relative > 0) bucket += numBuckets;
    n = relative < 0 ? -relative : relative;
  } else {
    n = relative < 0 ? -relative : 0;
  }
  int64_t maxExact = numBuckets / 2;
  if (n < maxExact) return bucket + n;
  // Logarithmically bigger bins up to maxDistance; everything farther shares the last bucket.
  auto large = maxExact + static_cast<int64_t>(std::log(static_cast<double>(n) / maxExact) /
                                               std::log(static_cast<double>(maxDistance) / maxExact) *
                                               static_cast<double>(numBuckets - maxExact));
  return bucket + std::min(large, numBuckets - 1);
}

}  // namespace xtrap
