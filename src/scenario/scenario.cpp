#include "scenario/scenario.h"

#include <toml++/toml.h>

#include <algorithm>
#include <stdexcept>

#include "data/wikitext.h"
#include "run/config_identity.h"
#include "scenario/eval_block.h"
#include "scenario/probe_block.h"
#include "scenario/scenario_toml.h"
#include "scenario/variant_keys.h"
#include "util/atomic_file.h"

namespace xtrap {
namespace fs = std::filesystem;

std::vector<const ScenarioVariant*> Scenario::select(const std::vector<std::string>& names) const {
  std::vector<const ScenarioVariant*> out;
  for (const auto& v : variants)
    if (names.empty() || std::find(names.begin(), names.end(), v.name) != names.end()) out.push_back(&v);
  return out;
}

Scenario parseScenario(const std::string& text, const std::string& source, const fs::path& baseDir) {
  ScenarioSource src{source, baseDir};
  toml::table doc;
  try {
    doc = toml::parse(text, source);
  } catch (const toml::parse_error& e) {
    src.fail(e.source(), std::string(e.description()));
  }
  rejectUnknown(src, doc, "the scenario (top level)", {"description", "train", "variant", "eval", "probe"});
  Scenario s;
  s.name = fs::path(source).stem().string();
  s.text = text;
  if (const toml::node* d = doc.get("description")) s.description = TomlValue{src, "description", *d}.string();

  ScenarioVariant base;
  base.train.dataDir = defaultDataDir().string();
  // [train] is for the variants the scenario trains; one that only evaluates pretrained models, or
  // adapts them (init), needs none.
  const toml::node* train = doc.get("train");
  static const toml::table noTable;
  const toml::table& trainTable = train ? asTable(src, *train, "train") : noTable;
  applyConfigTable(src, trainTable, "[train]", {"seeds"}, base);
  std::vector<uint64_t> baseSeeds = parseSeeds(src, trainTable);
  bool seedSet = trainTable.contains("seed") || trainTable.contains("init_seed");

  const toml::node* variants = doc.get("variant");
  const toml::array* list = variants ? variants->as_array() : nullptr;
  if (!list || list->empty()) throw std::invalid_argument(source + ": needs at least one [[variant]]");
  for (const auto& node : *list) {
    const toml::table& t = asTable(src, node, "variant");
    ScenarioVariant v = base;
    const toml::node* name = t.get("name");
    if (!name) src.fail(t.source(), "[[variant]] needs a name");
    v.name = TomlValue{src, "name", *name}.string();
    if (!validVariantName(v.name))
      src.fail(name->source(), "name: use letters, digits, '.', '_' and '-' (up to 64), got '" + v.name + "'");
    for (const auto& other : s.variants)
      if (other.name == v.name) src.fail(name->source(), "name: duplicate variant '" + v.name + "'");
    if (t.contains("model")) {
      // Evaluated as it is: of [train], only where it runs and the text it scores apply.
      ScenarioVariant pretrained;
      pretrained.name = v.name;
      pretrained.train.dataDir = base.train.dataDir;
      pretrained.train.device = base.train.device;
      pretrained.train.dtype = base.train.dtype;
      pretrained.train.threads = base.train.threads;
      applyPretrainedVariant(src, t, pretrained);
      s.variants.push_back(pretrained);
      continue;
    }
    // A variant with init takes its model from its source and may give every training key itself.
    if (!train && !t.contains("init"))
      src.fail(t.source(), "variant '" + v.name + "' trains a model (it names no model = \"DIR\"): missing [train]");
    if (t.contains("init")) {
      if (!baseSeeds.empty())
        src.fail(t.source(), "variant '" + v.name + "': seeds do not apply to a variant with init");
      applyInitVariant(src, t, s.variants, v);
    } else {
      for (const std::string& key : initVariantKeys())
        if (const toml::node* node = t.get(key))
          src.fail(node->source(), "'" + key + "' applies to a variant with init (variant '" + v.name + "')");
      applyConfigTable(src, t, "[[variant]] '" + v.name + "'", {"name", "seeds"}, v);
    }
    try {
      v.model.validate();
      v.train.validate();
    } catch (const std::invalid_argument& e) {
      src.fail(t.source(), "variant '" + v.name + "': " + e.what());
    }
    std::vector<uint64_t> seeds = v.adapted()           ? std::vector<uint64_t>{}
                                  : t.contains("seeds") ? parseSeeds(src, t)
                                                        : baseSeeds;
    if (!seeds.empty() && (seedSet || t.contains("seed") || t.contains("init_seed")))
      src.fail(t.source(), "variant '" + v.name + "': seeds sets seed and init_seed; give one or the other");
    if (seeds.empty()) s.variants.push_back(v);
    for (uint64_t seed : seeds) {
      ScenarioVariant run = v;
      run.train.seed = run.model.initSeed = seed;
      run.repeated = true;
      s.variants.push_back(run);
    }
  }

  const toml::node* eval = doc.get("eval");
  if (!eval) throw std::invalid_argument(source + ": missing [eval]");
  if (auto* t = eval->as_table()) {
    s.evals.push_back(parseEval(src, *t, s.variants));
  } else if (auto* a = eval->as_array()) {
    for (const auto& node : *a) s.evals.push_back(parseEval(src, asTable(src, node, "eval"), s.variants));
  } else {
    src.fail(eval->source(), "eval: expected [eval] or [[eval]] tables");
  }
  if (s.evals.empty()) throw std::invalid_argument(source + ": needs at least one [eval]");

  if (const toml::node* probe = doc.get("probe")) {
    s.probe = parseProbe(src, asTable(src, *probe, "probe"), s.variants);
    s.hasProbe = true;
  }
  return s;
}

void linkInitSources(Scenario& s) {
  for (ScenarioVariant& v : s.variants) {
    if (!v.adapted()) continue;
    const ScenarioVariant& source = *s.select({v.initVariant}).front();
    if (source.train.device == "auto") throw std::logic_error("linkInitSources: resolve the devices (auto) first");
    v.train.initSource = source.pretrained() ? source.weightsDigest : runIdentityHash(source.model, source.train);
  }
}

Scenario loadScenario(const fs::path& file) {
  if (!fs::is_regular_file(file)) throw std::invalid_argument("no scenario file " + file.string());
  return parseScenario(readTextFile(file), file.string(), file.parent_path());
}

}  // namespace xtrap
