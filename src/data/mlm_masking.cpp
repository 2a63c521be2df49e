#include "data/mlm_masking.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>

namespace xtrap {
namespace {
// SplitMix64 finaliser: a good 64-bit mix, cheap enough to call per token.
uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}
double unit(uint64_t h) { return double(h >> 11) * (1.0 / 9007199254740992.0); }  // [0, 1)
// Distinct salts keep the count, shuffle, block and corruption streams of one seed independent.
enum Salt : uint64_t { kCount = 1, kShuffle = 2, kBlock = 3, kCorruption = 4, kSequence = 5 };
uint64_t hashOf(uint64_t seed, Salt salt, uint64_t value) { return mix(mix(seed ^ mix(salt)) ^ mix(value)); }
}  // namespace

std::vector<int64_t> exactCountSelection(uint64_t seed, int64_t n, double maskProb) {
  if (n <= 0) return {};
  auto count =
      std::min<int64_t>(n, static_cast<int64_t>(std::floor(maskProb * double(n) + unit(hashOf(seed, kCount, 0)))));
  // Partial Fisher-Yates: the first `count` entries are a uniform sample without replacement
  // (the modulo bias is below 2^-40 for n < 2^24).
  std::vector<int64_t> offsets(static_cast<size_t>(n));
  std::iota(offsets.begin(), offsets.end(), int64_t(0));
  for (int64_t k = 0; k < count; ++k) {
    auto r = k + static_cast<int64_t>(hashOf(seed, kShuffle, uint64_t(k)) % uint64_t(n - k));
    std::swap(offsets[size_t(k)], offsets[size_t(r)]);
  }
  offsets.resize(static_cast<size_t>(count));
  std::sort(offsets.begin(), offsets.end());
  return offsets;
}

std::vector<int64_t> alignedBlockSelection(uint64_t seed, double maskProb, int64_t block, int64_t streamLength,
                                           int64_t begin, int64_t end) {
  if (block < 1) throw std::invalid_argument("masking blocks need at least one token");
  std::vector<int64_t> positions;
  for (int64_t k = begin / block; k * block < std::min(end, streamLength); ++k) {
    int64_t first = k * block, n = std::min(block, streamLength - first);
    for (int64_t offset : exactCountSelection(hashOf(seed, kBlock, uint64_t(k)), n, maskProb))
      if (first + offset >= begin && first + offset < end) positions.push_back(first + offset);
  }
  return positions;
}

MaskChoice mlmCorruption(uint64_t seed, int64_t position, const std::vector<int32_t>& replacementWords) {
  if (replacementWords.empty()) throw std::invalid_argument("masking needs at least one replacement word");
  uint64_t h = hashOf(seed, kCorruption, static_cast<uint64_t>(position));
  double u = unit(h);
  MaskChoice c;
  if (u < 0.8) {
    c.action = MaskAction::Mask;
  } else if (u < 0.9) {
    c.action = MaskAction::Random;
    c.randomToken = replacementWords[mix(h) % replacementWords.size()];
  } else {
    c.action = MaskAction::Keep;
  }
  return c;
}

uint64_t stepMaskSeed(uint64_t seed, int64_t step) { return mix(seed ^ mix(static_cast<uint64_t>(step) + 1)); }

uint64_t sequenceMaskSeed(uint64_t stepSeed, int64_t index) {
  return hashOf(stepSeed, kSequence, static_cast<uint64_t>(index));
}

}  // namespace xtrap
