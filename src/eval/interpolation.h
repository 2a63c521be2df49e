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
//   dynamic-ntk  ntk with a = max(a0 * len / L_train, 1), len the length of the window scored
//  linear and ntk use one fixed a for a whole sweep: --scale, else the largest Lvalid of the
//  sweep / L_train (keezen's NTK-ALiBi picks its factor before inference). Every a is clamped
//  to >= 1: interpolation never makes slopes steeper.
//  rotary: linear = position interpolation (positions / a); ntk and dynamic-ntk = NTK-aware base
//  scaling (base * a^(D/(D-2)), D = head dim).
#include <cstdint>
#include <string>
#include <vector>

namespace xtrap {

enum class Interp { None, Linear, Ntk, DynamicNtk };

Interp parseInterp(const std::string& name);  // throws listing valid names
std::string interpName(Interp i);

// The fixed a of linear / ntk over a sweep whose longest window is maxLvalid: fixedScale if > 0,
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

// Per-head slope divisors of one direction's n slopes (ntk ranks them among themselves).
std::vector<double> slopeDivisors(Interp interp, double a, const std::vector<double>& slopes);

// Past and future divisors (H each) for heads with these slopes; a blocked direction is left
// out of its direction's ranking (divisor 1).
struct SlopeDivisors {
  std::vector<double> past, future;
};
SlopeDivisors directionalSlopeDivisors(Interp interp, double a, const std::vector<double>& slopePast,
                                       const std::vector<double>& slopeFuture, const std::vector<bool>& blockPast,
                                       const std::vector<bool>& blockFuture);

struct RotarySettings {
  double base;
  double positionScale;
};
RotarySettings rotaryInterpolation(Interp interp, double a, double base, int64_t headDim);

}  // namespace xtrap
