#include "data/mlm_masking.h"

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
}  // namespace

uint64_t stepMaskSeed(uint64_t seed, int64_t step) { return mix(seed ^ mix(static_cast<uint64_t>(step) + 1)); }

MaskChoice mlmMaskChoice(uint64_t seed, int64_t position, double maskProb, int64_t wordCount) {
  uint64_t h = mix(seed ^ mix(static_cast<uint64_t>(position)));
  MaskChoice c;
  if (unit(h) >= maskProb) return c;
  uint64_t h2 = mix(h);
  double u = unit(h2);
  if (u < 0.8) {
    c.action = MaskAction::Mask;
  } else if (u < 0.9) {
    c.action = MaskAction::Random;
    c.randomToken = static_cast<int32_t>(mix(h2) % static_cast<uint64_t>(wordCount));
  } else {
    c.action = MaskAction::Keep;
  }
  return c;
}

}  // namespace xtrap
