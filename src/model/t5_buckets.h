#pragma once
// T5's relative-position bucket function (Raffel et al.; as in the reference implementation).
// relative = key - query. Decoders use bidirectional = false: all future distances share bucket 0.
#include <cstdint>

namespace xtrap {

int64_t t5RelativeBucket(int64_t relative, bool bidirectional, int64_t numBuckets, int64_t maxDistance);

}  // namespace xtrap
