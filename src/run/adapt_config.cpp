#include "run/adapt_config.h"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

#include "util/choices.h"

namespace xtrap {

ModelConfig adaptedModelConfig(const ModelConfig& source, int64_t L, Interp interp, double a) {
  const std::string what = "--init with --interp " + interpName(interp);
  if (isDynamic(interp))
    throw std::invalid_argument(what +
                                ": a dynamic interpolation changes a with each window's length; an adapted "
                                "run bakes one fixed factor (linear, ntk or yarn)");
  if (interp != Interp::None && !(a >= 1)) throw std::invalid_argument(what + ": the factor must be >= 1");
  ModelConfig m = source;
  m.contextLength = L;
  PositionMethod pos = source.position();
  if (pos == PositionMethod::Learned && source.positionTableSize() < L)
    throw std::invalid_argument(fmt::format(
        "--init: the source's learned position table has {} rows, fewer than --L {}", source.positionTableSize(), L));
  if (pos == PositionMethod::Learned && source.maxPositions == 0) m.maxPositions = source.contextLength;
  if (interp == Interp::None) return m;
  if (pos == PositionMethod::Rotary) {
    if (!source.ropeScaling.isDefault())
      throw std::invalid_argument(what + ": the source already has " + source.ropeScaling.type +
                                  " rope scaling; adapt it with --interp none");
    if (interp == Interp::Ntk) {
      m.rotaryBase = rotaryInterpolation(interp, a, source.rotaryBase, source.rotaryDim(), source.contextLength).base;
    } else {
      m.ropeScaling.type = interpName(interp);  // linear | yarn
      m.ropeScaling.factor = a;
      if (interp == Interp::Yarn) m.ropeScaling.originalMaxPositions = source.contextLength;
    }
  } else if (isLinearBias(pos)) {
    if (isYarn(interp)) throw std::invalid_argument(what + ": yarn applies to rotary, not " + source.pos);
    if (source.alibiInterp != "none")
      throw std::invalid_argument(what + ": the source's slopes are already interpolated (" + source.alibiInterp +
                                  "); adapt it with --interp none");
    m.alibiInterp = interpName(interp);
    m.alibiInterpFactor = a;
  } else {
    throw std::invalid_argument(what + ": applies to ALiBi-family and rotary methods, not " + source.pos +
                                " (use --interp none)");
  }
  m.validate();  // learned slopes are refused here
  return m;
}

double defaultAdaptScale(int64_t L, int64_t sourceL) { return std::max(1.0, double(L) / double(sourceL)); }

const std::vector<std::string>& adaptRecipeNames() {
  static const std::vector<std::string> names = {"pi", "yarn"};
  return names;
}

void applyAdaptRecipe(const std::string& recipe, TrainConfig& t, const std::function<bool(const std::string&)>& given) {
  checkName(adaptRecipeNames(), recipe, "recipe");
  // Both papers fine-tune with these numbers (PI section 3.1, YaRN section 4.1).
  if (!given("lr")) t.lr = 2e-5;
  if (!given("warmup")) t.warmupSteps = 20;
  if (!given("schedule")) t.schedule = "constant";
  if (!given("weight_decay")) t.weightDecay = 0.0;
  if (!given("adam_betas")) t.beta1 = 0.9, t.beta2 = 0.95;
}

}  // namespace xtrap
