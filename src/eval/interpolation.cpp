#include "eval/interpolation.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>

namespace xtrap {

Interp parseInterp(const std::string& name) {
  if (name == "none") return Interp::None;
  if (name == "linear") return Interp::Linear;
  if (name == "ntk") return Interp::Ntk;
  if (name == "dynamic-ntk") return Interp::DynamicNtk;
  throw std::invalid_argument("unknown --interp '" + name + "' (valid: none, linear, ntk, dynamic-ntk)");
}

std::string interpName(Interp i) {
  switch (i) {
    case Interp::None:
      return "none";
    case Interp::Linear:
      return "linear";
    case Interp::Ntk:
      return "ntk";
    case Interp::DynamicNtk:
      return "dynamic-ntk";
  }
  return "none";
}

double interpolationScale(Interp interp, int64_t Lvalid, int64_t Ltrain, double fixedScale, double a0) {
  if (interp == Interp::None) return 1.0;
  double ratio = double(Lvalid) / double(Ltrain);
  if (interp == Interp::DynamicNtk) return std::max(a0 * ratio, 1.0);
  return fixedScale > 0 ? fixedScale : ratio;
}

std::vector<double> slopeDivisors(Interp interp, double a, const std::vector<double>& slopes) {
  size_t H = slopes.size();
  std::vector<double> divisors(H, 1.0);
  if (interp == Interp::None) return divisors;
  if (interp == Interp::Linear) return std::vector<double>(H, a);
  if (H == 1) return divisors;
  std::vector<size_t> order(H);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) { return slopes[x] > slopes[y]; });
  for (size_t rank = 0; rank < H; ++rank) divisors[order[rank]] = std::pow(a, double(rank) / double(H - 1));
  return divisors;
}

RotarySettings rotaryInterpolation(Interp interp, double a, double base, int64_t headDim) {
  switch (interp) {
    case Interp::None:
      return {base, 1.0};
    case Interp::Linear:
      return {base, a};
    default:
      return {base * std::pow(a, double(headDim) / double(headDim - 2)), 1.0};
  }
}

}  // namespace xtrap
