#pragma once
// A scenario's optional [probe] block: bias and attention dumps of the variants it selects.
// Torch-free.
#include <vector>

#include "scenario/scenario.h"
#include "scenario/scenario_toml.h"

namespace xtrap {

ScenarioProbe parseProbe(const ScenarioSource& src, const toml::table& t, const std::vector<ScenarioVariant>& variants);

}  // namespace xtrap
