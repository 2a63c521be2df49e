#pragma once
// Inference-time length interpolation as a transform of the position method's parameters.
//  ALiBi family (a = scale):
//   linear       m_h / a for every head
//   ntk          m_h / a^((r-1)/(H-1)), r = 1..H the head's rank by slope, largest first: the
//                steepest head is unchanged, the flattest divided by a. For power-of-2 H with
//                standard slopes this is exactly 2^(-8h/H) / a^((h-1)/(H-1)); for other H (and for
//                learned slopes) the same per-rank factor is applied to the heads' actual slopes.
//                H = 1: the single head is unchanged.
//   dynamic-ntk  ntk with a = max(a0 * Lvalid / L_train, 1)
//  rotary: linear = position interpolation (positions / a); ntk and dynamic-ntk = NTK-aware base
//  scaling (base * a^(D/(D-2)), D = head dim).
// a defaults to Lvalid / L_train; --scale fixes it.
#include <cstdint>
#include <string>
#include <vector>

namespace xtrap {

enum class Interp { None, Linear, Ntk, DynamicNtk };

Interp parseInterp(const std::string& name);  // throws listing valid names
std::string interpName(Interp i);

// The factor a used at this Lvalid (1 for none).
double interpolationScale(Interp interp, int64_t Lvalid, int64_t Ltrain, double fixedScale, double a0);

// Per-head slope divisors for heads whose current slopes are `slopes` (H).
std::vector<double> slopeDivisors(Interp interp, double a, const std::vector<double>& slopes);

struct RotarySettings {
  double base;
  double positionScale;
};
RotarySettings rotaryInterpolation(Interp interp, double a, double base, int64_t headDim);

}  // namespace xtrap
