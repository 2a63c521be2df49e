#pragma once
// The keys of a scenario's [train] and [[variant]] tables: model and training settings of the
// variants a scenario trains, and `model = "DIR"` for a pretrained model it evaluates as it is.
// Torch-free.
#include <set>
#include <string>
#include <vector>

#include "scenario/scenario.h"
#include "scenario/scenario_toml.h"

namespace xtrap {

// Applies a [train] or [[variant]] table's model and training keys to `v`; `extra` lists keys
// the caller reads itself. `config` (a named configuration) goes first.
void applyConfigTable(const ScenarioSource& src, const toml::table& t, const std::string& where,
                      const std::set<std::string>& extra, ScenarioVariant& v);

// The keys a [[variant]] naming a pretrained model takes besides `name` and `model`: where and in
// what precision it runs, and the text it scores. [train] gives it only these.
const std::set<std::string>& pretrainedVariantKeys();

// A [[variant]] with `model = "DIR"` (relative to the scenario file): reads DIR's config.json and
// weights digest into `v`, then the table's pretrainedVariantKeys(). Fails, one line naming the
// path, for a directory that is missing, is not a Hugging Face model directory, or whose
// config.json xtrap does not compute; and naming any other key.
void applyPretrainedVariant(const ScenarioSource& src, const toml::table& t, ScenarioVariant& v);

// The keys a [[variant]] with `init = "NAME"` takes besides its training keys and L.
const std::set<std::string>& initVariantKeys();

// A [[variant]] with `init = "NAME"` (train --init within a scenario, run/adapt_config.h): NAME's
// model at the table's L with `interp` (default none) at factor `scale` (default L / NAME's L)
// baked in, trained from NAME's final weights with the table's training keys over `v`'s (from
// [train]) and `recipe`'s settings where the table does not give them. NAME must be an earlier
// variant the scenario trains once (no seeds); model keys, seeds and other data are one-line
// errors. v.train.initSource is set once the devices are resolved (linkInitSources).
void applyInitVariant(const ScenarioSource& src, const toml::table& t, const std::vector<ScenarioVariant>& earlier,
                      ScenarioVariant& v);

// The `seeds` list of a table (empty when absent): distinct seeds >= 0, at least one.
std::vector<uint64_t> parseSeeds(const ScenarioSource& src, const toml::table& t);

bool validVariantName(const std::string& name);
// Fails at `v` unless every name is a variant's.
void checkVariantNames(const TomlValue& v, const std::vector<std::string>& names,
                       const std::vector<ScenarioVariant>& variants);

}  // namespace xtrap
