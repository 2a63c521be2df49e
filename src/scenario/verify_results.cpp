#include "scenario/verify_results.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <set>

#include "eval/eval_report.h"
#include "scenario/run_identity.h"
#include "util/atomic_file.h"

namespace xtrap {
namespace fs = std::filesystem;

std::vector<std::string> verifyScenarioResults(const Scenario& s, const fs::path& resultsRoot) {
  std::vector<std::string> problems;
  fs::path dir = resultsRoot / s.name;
  auto problem = [&](const std::string& what) { problems.push_back(fmt::format("{}: {}", dir.string(), what)); };
  if (!fs::exists(dir / "manifest.json")) {
    problem("no manifest.json (run the scenario first)");
    return problems;
  }
  nlohmann::json manifest;
  try {
    manifest = nlohmann::json::parse(readTextFile(dir / "manifest.json"));
  } catch (const std::exception& e) {
    problem(std::string("manifest.json does not parse: ") + e.what());
    return problems;
  }
  if (manifest.contains("complete") && !manifest.value("complete", false))
    problem("manifest.json says the run was not complete");
  if (manifest.value("xtrap_version", std::string()).find("git ") == std::string::npos)
    problem("manifest.json does not state the code version (xtrap_version with its git commit)");
  if (!fs::exists(dir / "version.txt")) problem("no version.txt");
  if (!fs::exists(dir / "scenario.toml") || readTextFile(dir / "scenario.toml") != s.text)
    problem("scenario.toml differs from the scenario file: the results come from another version of it");

  const nlohmann::json variants = manifest.value("variants", nlohmann::json::object());
  // Each variant's device as the manifest records it, before any adapted variant names its source.
  Scenario resolved = s;
  for (ScenarioVariant& v : resolved.variants)
    if (v.train.device == "auto")
      v.train.device = variants.value(v.label(), nlohmann::json::object()).value("device", std::string("cpu"));
  linkInitSources(resolved);
  std::set<std::string> labels;
  for (const ScenarioVariant& v : resolved.variants) {
    labels.insert(v.label());
    if (!variants.contains(v.label())) {
      problem(fmt::format("variant '{}' is not in manifest.json", v.label()));
      continue;
    }
    const nlohmann::json& entry = variants.at(v.label());
    std::string named = fs::path(entry.value("run_dir", std::string())).filename().string();
    std::string computed = variantRunDir("", v).filename().string();
    if (v.pretrained() && entry.value("weights_digest", std::string()) != v.weightsDigest)
      problem(fmt::format("variant '{}': manifest.json records weights {}, {} now holds {}", v.label(),
                          entry.value("weights_digest", std::string("none")), v.pretrainedDir, v.weightsDigest));
    else if (named != computed)
      problem(fmt::format("variant '{}': manifest.json names run {}, today's code computes {}", v.label(), named,
                          computed));
  }
  for (const auto& [label, entry] : variants.items())
    if (!labels.count(label)) problem(fmt::format("manifest.json has a variant '{}' the scenario lacks", label));

  if (!fs::exists(dir / "results.csv")) {
    problem("no results.csv");
    return problems;
  }
  std::vector<EvalRow> rows;
  try {
    rows = readEvalRows(dir / "results.csv");
  } catch (const std::exception& e) {
    problem(e.what());
    return problems;
  }
  for (const EvalRow& r : rows) {
    bool accounted = false;
    for (const ScenarioEval& e : s.evals)
      for (const ScenarioVariant* v : s.select(e.variants))
        if (v->name == r.run && std::find(e.lvalids.begin(), e.lvalids.end(), r.Lvalid) != e.lvalids.end())
          accounted = true;
    if (!accounted)
      problem(fmt::format("results.csv row {} at Lvalid {} belongs to no variant and eval block of the file", r.run,
                          r.Lvalid));
  }
  return problems;
}

}  // namespace xtrap
