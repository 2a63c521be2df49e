#pragma once
// Applies an interpolation (model/interpolation.h) to a model: sets its ALiBi-family slope
// divisors or rotary settings for factor a. Evaluation and the probes both call it, so the
// probes need not include the evaluation driver.
#include <string>

#include "model/interpolation.h"
#include "model/transformer.h"

namespace xtrap {

// Sets the model's slopes / rotary settings for interpolation factor a; returns a summary of
// what is now used ("0.5 0.25 ..." for slopes, "past ... | future ..." where the directions
// differ, "base=... pos_scale=..." for rotary, "" else). ntkHeads applies to ALiBi-family slopes
// only (an error for other methods).
std::string applyInterpolation(Transformer& model, Interp interp, double a, NtkHeads ntkHeads = NtkHeads::All);
// Throws std::invalid_argument with a one-line reason when the interpolation does not apply to
// the model's position method (applyInterpolation checks it too; callers check before printing).
void checkInterpolationApplies(Transformer& model, Interp interp, NtkHeads ntkHeads = NtkHeads::All);

}  // namespace xtrap
