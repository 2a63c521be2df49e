#include "model/interpolation.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>
#include <utility>

#include "util/choices.h"

namespace xtrap {

namespace {
const std::vector<std::pair<std::string, Interp>>& interpTable() {
  static const std::vector<std::pair<std::string, Interp>> t = {
      {"none", Interp::None}, {"linear", Interp::Linear},
      {"ntk", Interp::Ntk},   {"dynamic-ntk", Interp::DynamicNtk},
      {"yarn", Interp::Yarn}, {"dynamic-yarn", Interp::DynamicYarn}};
  return t;
}
}  // namespace

const std::vector<std::string>& interpNames() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    for (const auto& [n, i] : interpTable()) v.push_back(n);
    return v;
  }();
  return names;
}

Interp parseInterp(const std::string& name) {
  checkName(interpNames(), name, "--interp");
  for (const auto& [n, i] : interpTable())
    if (n == name) return i;
  return Interp::None;  // not reached: checkName throws
}

std::string interpName(Interp interp) {
  for (const auto& [n, i] : interpTable())
    if (i == interp) return n;
  throw std::logic_error("unnamed interpolation");
}

bool isYarn(Interp interp) { return interp == Interp::Yarn || interp == Interp::DynamicYarn; }

bool isDynamic(Interp interp) { return interp == Interp::DynamicNtk || interp == Interp::DynamicYarn; }

bool usesFixedScale(Interp interp) {
  return interp == Interp::Linear || interp == Interp::Ntk || interp == Interp::Yarn;
}

const std::vector<std::string>& ntkHeadsNames() {
  static const std::vector<std::string> names{"all", "leading-power-of-two"};
  return names;
}

NtkHeads parseNtkHeads(const std::string& name) {
  checkName(ntkHeadsNames(), name, "--ntk-heads");
  return name == "all" ? NtkHeads::All : NtkHeads::LeadingPowerOfTwo;
}

std::string ntkHeadsName(NtkHeads heads) { return heads == NtkHeads::All ? "all" : "leading-power-of-two"; }

std::string interpLabel(Interp interp, NtkHeads heads, bool scalePerLength) {
  bool ntk = interp == Interp::Ntk || interp == Interp::DynamicNtk;
  return interpName(interp) + (ntk && heads != NtkHeads::All ? "/" + ntkHeadsName(heads) : "") +
         (scalePerLength && usesFixedScale(interp) ? "/per-length" : "");
}

double staticInterpolationScale(int64_t maxLvalid, int64_t Ltrain, double fixedScale) {
  return std::max(fixedScale > 0 ? fixedScale : double(maxLvalid) / double(Ltrain), 1.0);
}

double InterpolationPlan::scaleFor(int64_t windowLength) const {
  switch (interp) {
    case Interp::None:
      return 1.0;
    case Interp::DynamicNtk:
    case Interp::DynamicYarn:
      return std::max(a0 * double(windowLength) / double(Ltrain), 1.0);
    default:
      return std::max(fixedScale, 1.0);
  }
}

InterpolationPlan interpolationPlan(Interp interp, int64_t maxLength, int64_t Ltrain, double fixedScale, double a0) {
  return {interp, staticInterpolationScale(maxLength, Ltrain, fixedScale), a0, Ltrain};
}

std::vector<double> slopeDivisors(Interp interp, double a, const std::vector<double>& slopes, NtkHeads ntkHeads) {
  size_t n = slopes.size();
  std::vector<double> divisors(n, 1.0);
  if (interp == Interp::None) return divisors;
  if (interp == Interp::Linear) return std::vector<double>(n, a);
  if (n <= 1) return divisors;  // one slope is unchanged; a fully blocked direction has none
  if (ntkHeads == NtkHeads::LeadingPowerOfTwo) {
    size_t leading = size_t(1) << static_cast<size_t>(std::floor(std::log2(double(n))));
    for (size_t h = 0; h < leading; ++h) divisors[h] = std::pow(a, double(h) / double(n - 1));
    return divisors;
  }
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) { return slopes[x] > slopes[y]; });
  for (size_t rank = 0; rank < n; ++rank) divisors[order[rank]] = std::pow(a, double(rank) / double(n - 1));
  return divisors;
}

SlopeDivisors directionalSlopeDivisors(Interp interp, double a, const std::vector<double>& slopePast,
                                       const std::vector<double>& slopeFuture, const std::vector<bool>& blockPast,
                                       const std::vector<bool>& blockFuture, NtkHeads ntkHeads) {
  // One direction: rank the unblocked heads' slopes among themselves.
  auto direction = [&](const std::vector<double>& slopes, const std::vector<bool>& blocked) {
    std::vector<size_t> heads;
    std::vector<double> groupSlopes;
    for (size_t h = 0; h < slopes.size(); ++h)
      if (!blocked[h]) heads.push_back(h), groupSlopes.push_back(slopes[h]);
    std::vector<double> divisors(slopes.size(), 1.0);
    auto groupDivisors = slopeDivisors(interp, a, groupSlopes, ntkHeads);
    for (size_t k = 0; k < heads.size(); ++k) divisors[heads[k]] = groupDivisors[k];
    return divisors;
  };
  return {direction(slopePast, blockPast), direction(slopeFuture, blockFuture)};
}

RotarySettings rotaryInterpolation(Interp interp, double a, double base, int64_t headDim, int64_t Ltrain) {
  switch (interp) {
    case Interp::None:
      return {base, 1.0};
    case Interp::Linear:
      return {base, a};
    case Interp::Yarn:
    case Interp::DynamicYarn: {
      // Pair index at which a pair makes `turns` turns over L_train (fractional); the ramp runs
      // between whole indices, as the authors' find_correction_range rounds it.
      auto pairTurning = [&](double turns) {
        return double(headDim) * std::log(double(Ltrain) / (turns * 2.0 * M_PI)) / (2.0 * std::log(base));
      };
      double first = std::max(std::floor(pairTurning(kYarnBeta)), 0.0);
      double last = std::min(std::ceil(pairTurning(kYarnAlpha)), double(headDim - 1));
      if (last == first) last += 0.001;  // the authors' guard against a ramp of zero width
      RotarySettings yarn{base, 1.0};
      for (int64_t d = 0; d < headDim / 2; ++d) {
        double keep = 1.0 - std::clamp((double(d) - first) / (last - first), 0.0, 1.0);
        yarn.frequencyFactors.push_back((1.0 - keep) / a + keep);
      }
      yarn.attentionFactor = 0.1 * std::log(a) + 1.0;
      return yarn;
    }
    default:
      return {base * std::pow(a, double(headDim) / double(headDim - 2)), 1.0};
  }
}

void checkInterpolationComposes(Interp interp, const RopeScaling& scaling) {
  const std::string& type = scaling.type;
  if (interp == Interp::None || type == "default" || type == "linear") return;
  if (interp == Interp::Linear && (type == "yarn" || type == "llama3")) return;
  std::string why = scaling.dependsOnLength()
                        ? "its frequencies follow the window's length, and positions / a would change which"
                        : "its frequencies are already rescaled pair by pair from the base";
  throw std::invalid_argument("--interp " + interpName(interp) + " has no defined meaning on a checkpoint with " +
                              type + " rope scaling (" + why + "); use " +
                              (type == "yarn" || type == "llama3" ? "linear or none" : "none"));
}

void checkExtensionComposes(Interp interp, const ContextExtension& extension) {
  bool bounded = extension.method == ExtensionMethod::Sinks || extension.method == ExtensionMethod::Lambda;
  if (interp != Interp::None && bounded)
    throw std::invalid_argument("--interp " + interpName(interp) + " with --extend " + extension.label() +
                                ": the extension keeps every distance within L_train; nothing to interpolate");
}

}  // namespace xtrap
