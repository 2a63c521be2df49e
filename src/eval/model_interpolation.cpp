#include "eval/model_interpolation.h"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>
#include <vector>

#include "util/execution_context.h"

namespace xtrap {

namespace {
// The slopes of the heads not blocked in this direction, in head order.
std::string joinSlopes(const std::vector<double>& slopes, const std::vector<bool>& blocked) {
  std::string s;
  for (size_t h = 0; h < slopes.size(); ++h)
    if (!blocked[h]) s += fmt::format("{}{:.5g}", s.empty() ? "" : " ", slopes[h]);
  return s;
}
}  // namespace

void checkInterpolationApplies(Transformer& model, Interp interp, NtkHeads ntkHeads) {
  if (isYarn(interp) && !model->rotary())
    throw std::invalid_argument("--interp " + interpName(interp) + " applies to rotary, not " + model->config.pos);
  if (interp != Interp::None && !model->linearBias() && !model->rotary())
    throw std::invalid_argument("--interp " + interpName(interp) + " applies to ALiBi-family and rotary methods, not " +
                                model->config.pos);
  if (Rotary* rot = model->rotary()) checkInterpolationComposes(interp, rot->scaling);
  if (ntkHeads != NtkHeads::All && !model->linearBias())
    throw std::invalid_argument("--ntk-heads applies to ALiBi-family slopes, not " + model->config.pos);
}

std::string applyInterpolation(Transformer& model, Interp interp, double a, NtkHeads ntkHeads) {
  checkInterpolationApplies(model, interp, ntkHeads);
  std::string used;
  if (LinearBias* lb = model->linearBias()) {
    const LinearBiasSpec& spec = lb->spec();
    auto H = static_cast<size_t>(model->config.heads);
    lb->setSlopeDivisors(std::vector<double>(H, 1.0), std::vector<double>(H, 1.0));
    auto past = toHostDoubles(lb->slopePast()), future = toHostDoubles(lb->slopeFuture());
    SlopeDivisors d = directionalSlopeDivisors(interp, a, past, future, spec.blockPast, spec.blockFuture, ntkHeads);
    lb->setSlopeDivisors(d.past, d.future);
    past = toHostDoubles(lb->slopePast());
    future = toHostDoubles(lb->slopeFuture());
    // One list where past and future slopes are the same numbers (alibi, alibi-offset); else the
    // unblocked heads of each direction (one-sided halves, learned past/future slopes).
    bool anyFuture = std::find(spec.blockFuture.begin(), spec.blockFuture.end(), false) != spec.blockFuture.end();
    bool symmetric = !spec.learnedSlopes && spec.blockPast == spec.blockFuture && spec.slopePast == spec.slopeFuture;
    if (!anyFuture || symmetric)
      used = joinSlopes(past, spec.blockPast);
    else
      used = "past " + joinSlopes(past, spec.blockPast) + " | future " + joinSlopes(future, spec.blockFuture);
  }
  if (Rotary* rot = model->rotary()) {
    RotarySettings r =
        rotaryInterpolation(interp, a, model->config.rotaryBase, rot->rotated(), model->config.contextLength);
    rot->base = r.base;
    rot->positionScale = r.positionScale;
    rot->frequencyFactors = r.frequencyFactors;
    rot->attentionFactor = r.attentionFactor;
    used = fmt::format("base={:.6g} pos_scale={:.6g}", r.base, r.positionScale);
    if (isYarn(interp)) {
      // The factors run from 1/a (slow pairs, interpolated) to 1 (fast pairs, kept).
      auto [lo, hi] = std::minmax_element(r.frequencyFactors.begin(), r.frequencyFactors.end());
      used += fmt::format(" yarn_factors={:.4g}..{:.4g} attention={:.6g}", *lo, *hi, r.attentionFactor);
    }
  }
  model->clearBiasCache();
  return used;
}

}  // namespace xtrap
