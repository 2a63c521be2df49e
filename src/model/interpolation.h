#pragma once
// Inference-time length interpolation as a transform of the position method's parameters.
//  ALiBi family (a = scale >= 1):
//   linear       m_h / a for every head
//   ntk          m_h / a^((r-1)/(n-1)), r = 1..n the head's rank by slope among the n slopes of
//                its group, largest first: the steepest is unchanged, the flattest divided by a.
//                Past and future slopes are ranked separately (past among past, future among
//                future; a blocked direction is in no group), so a one-sided spec's halves are
//                each an H/2-head ALiBi and learned past/future slopes each a list of H. For a
//                power-of-2 H with standard slopes this is exactly 2^(-8h/H) / a^((h-1)/(H-1)).
//                n = 1: the single slope is unchanged.
//                NtkHeads::LeadingPowerOfTwo instead reproduces keezen/ntk_alibi's code: per
//                direction, of its n heads in head order only the first P = 2^floor(log2 n) are
//                scaled, head h by a^((h-1)/(n-1)), and the interleaved extra heads keep their
//                slopes (keezen marks this a todo). Both agree for power-of-2 n.
//   dynamic-ntk  ntk with a = max(a0 * len / L_train, 1), len the positions of the window scored
//                (with <bos>, counted)
//  linear and ntk use one fixed a for a whole sweep: --scale, else the largest Lvalid of the
//  sweep / L_train (xtrap's choice; keezen's NTK-ALiBi sets a = inference length / pretraining
//  length before inference, i.e. per evaluated length). Every a is clamped
//  to >= 1: interpolation never makes slopes steeper.
//  rotary: linear = position interpolation (positions / a); ntk and dynamic-ntk = NTK-aware base
//  scaling (base * a^(D/(D-2)), D = head dim); yarn (rotary only, fixed a like linear / ntk) =
//  YaRN (Peng et al. 2023) as its authors run it (jquesnelle/yarn's find_correction_range and
//  linear_ramp_mask; Hugging Face's _compute_yarn_parameters): NTK-by-parts frequencies plus an
//  attention temperature. Pair d's frequency theta_d = base^(-2d/D) becomes ((1 - g_d) / a + g_d)
//  theta_d, where g_d (1 = keep the frequency) ramps linearly in the pair INDEX d, i.e. in the log
//  of the turns r_d = L_train theta_d / (2 pi) a pair makes over the training length: with
//  d(r) = D ln(L_train / (2 pi r)) / (2 ln base) the index at which a pair turns r times,
//  lo = max(floor(d(beta)), 0), hi = min(ceil(d(alpha)), D - 1) (hi + 0.001 when equal), beta = 32,
//  alpha = 1, g_d = 1 - clamp((d - lo) / (hi - lo), 0, 1). Pairs before lo are left alone, pairs
//  from hi on are interpolated (divided by a); q and k are multiplied by sqrt(1/t) = 0.1 ln(a) + 1,
//  as the authors multiply cos and sin (logits by its square).
//   dynamic-yarn: yarn with a = max(a0 * len / L_train, 1) from each window's length, as
//   dynamic-ntk (the paper's "Dynamic-YaRN").
#include <cstdint>
#include <string>
#include <vector>

#include "model/context_extension.h"
#include "model/position/rope_scaling.h"

namespace xtrap {

enum class Interp { None, Linear, Ntk, DynamicNtk, Yarn, DynamicYarn };
bool isYarn(Interp interp);     // yarn or dynamic-yarn (rotary only)
bool isDynamic(Interp interp);  // a from each window's length: dynamic-ntk, dynamic-yarn
// Which heads ntk / dynamic-ntk rescale (see above).
enum class NtkHeads { All, LeadingPowerOfTwo };
NtkHeads parseNtkHeads(const std::string& name);  // throws listing valid names
const std::vector<std::string>& ntkHeadsNames();  // what parseNtkHeads accepts
std::string ntkHeadsName(NtkHeads heads);
// The interp column of a result row: the interpolation's name, "ntk/leading-power-of-two" (and
// "dynamic-ntk/...") when the heads rule is not the default, and ".../per-length" for a fixed-scale
// interpolation whose a is Lvalid / L_train at each length (eval --scale-per-length).
std::string interpLabel(Interp interp, NtkHeads heads, bool scalePerLength = false);

Interp parseInterp(const std::string& name);    // throws listing valid names
const std::vector<std::string>& interpNames();  // what parseInterp accepts, in the enum's order
std::string interpName(Interp i);

// linear, ntk and yarn use one fixed a for a sweep (staticInterpolationScale); --scale sets it.
bool usesFixedScale(Interp interp);

// The fixed a of linear / ntk / yarn over a sweep whose longest window is maxLvalid: fixedScale if > 0,
// else maxLvalid / L_train; clamped to >= 1.
double staticInterpolationScale(int64_t maxLvalid, int64_t Ltrain, double fixedScale);

// How a is chosen for every window of one evaluation: fixed (linear, ntk; 1 for none) or from
// the window's own length (dynamic-ntk).
struct InterpolationPlan {
  Interp interp = Interp::None;
  double fixedScale = 1.0;  // linear / ntk
  double a0 = 1.0;          // dynamic-ntk
  int64_t Ltrain = 1;       // dynamic-ntk
  double scaleFor(int64_t windowLength) const;
};
// The plan for a sweep whose longest window is maxLength: linear / ntk get
// staticInterpolationScale(maxLength, Ltrain, fixedScale).
InterpolationPlan interpolationPlan(Interp interp, int64_t maxLength, int64_t Ltrain, double fixedScale, double a0);

// Per-head slope divisors of one direction's n slopes, in head order (ntk ranks them among
// themselves, or with LeadingPowerOfTwo takes them in head order).
std::vector<double> slopeDivisors(Interp interp, double a, const std::vector<double>& slopes,
                                  NtkHeads ntkHeads = NtkHeads::All);

// Past and future divisors (H each) for heads with these slopes; a blocked direction is left
// out of its direction's ranking (divisor 1).
struct SlopeDivisors {
  std::vector<double> past, future;
};
SlopeDivisors directionalSlopeDivisors(Interp interp, double a, const std::vector<double>& slopePast,
                                       const std::vector<double>& slopeFuture, const std::vector<bool>& blockPast,
                                       const std::vector<bool>& blockFuture, NtkHeads ntkHeads = NtkHeads::All);

struct RotarySettings {
  double base;
  double positionScale;
  std::vector<double> frequencyFactors;  // yarn: (D/2) multipliers of the pairs' frequencies; empty = all 1
  double attentionFactor = 1.0;          // yarn: q and k are multiplied by this (sqrt(1/t))
};
// YaRN's ramp bounds in turns over L_train (the authors' beta_slow = 1 and beta_fast = 32).
constexpr double kYarnAlpha = 1.0, kYarnBeta = 32.0;
// Ltrain: the length the model was trained at (yarn's ramp counts turns over it).
// headDim: the rotated channels d of a head.
RotarySettings rotaryInterpolation(Interp interp, double a, double base, int64_t headDim, int64_t Ltrain);

// Whether --interp has a defined meaning on top of a pretrained checkpoint's own rope_scaling
// (docs/pretrained.md, "Rotary scaling", has the table). Every interpolation composes with default
// and linear checkpoints (computed from the checkpoint's base, frequencies and L_train, then the
// checkpoint's linear factor on top). linear (positions / a) also composes with yarn and llama3,
// whose frequencies are fixed. ntk, dynamic-ntk, yarn and dynamic-yarn on yarn, llama3, longrope
// or dynamic checkpoints, and linear on dynamic or longrope ones (whose frequencies follow the
// window's length: the stretched one or the real one?), have none: throws std::invalid_argument,
// one line naming both.
void checkInterpolationComposes(Interp interp, const RopeScaling& scaling);

// Whether an interpolation composes with a context extension (model/context_extension.h): sinks
// and lambda keep every distance a query sees within L_train, so there is nothing to stretch and
// any interpolation but none is refused (std::invalid_argument, one line naming both); the other
// methods re-assign the far pairs' positions, which the interpolation then rescales as it rescales
// the near ones.
void checkExtensionComposes(Interp interp, const ContextExtension& extension);

}  // namespace xtrap
