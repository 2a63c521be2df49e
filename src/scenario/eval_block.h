#pragma once
// A scenario's [eval] / [[eval]] block: lengths, modes, interpolations, retrieval settings, and
// the variants it scores, each checked against the block while parsing so that a scenario fails
// before any training, not after it. Torch-free.
#include <vector>

#include "scenario/scenario.h"
#include "scenario/scenario_toml.h"

namespace xtrap {

ScenarioEval parseEval(const ScenarioSource& src, const toml::table& t, const std::vector<ScenarioVariant>& variants);

}  // namespace xtrap
