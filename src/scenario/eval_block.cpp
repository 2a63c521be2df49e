#include "scenario/eval_block.h"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

#include "data/retrieval_prompt.h"
#include "eval/depth_list.h"
#include "eval/lvalid_range.h"
#include "model/context_extension.h"
#include "model/position_method.h"
#include "scenario/variant_keys.h"

namespace xtrap {
namespace {

// Why a variant cannot be evaluated as a block asks ("" when it can).
std::string evalProblem(const ScenarioVariant& v, const ScenarioEval& e) {
  PositionMethod p = v.model.position();
  int64_t positions = v.model.positionTableSize() - v.model.positionOffset;
  if (p == PositionMethod::Learned && e.lvalids.back() > positions)
    return fmt::format("lvalid {} exceeds its learned position table of {} rows (set max_positions)", e.lvalids.back(),
                       positions);
  if (v.model.usesBos() && e.lvalids.front() < 2) return "an encoder with <bos> needs lvalid >= 2";
  if (v.model.causal() && std::find(e.modes.begin(), e.modes.end(), "pll") != e.modes.end())
    return "modes pll (pseudo-log-likelihood) is for encoders";
  for (Interp i : e.interps) {
    if (i == Interp::None) continue;
    if (isYarn(i) && p != PositionMethod::Rotary)
      return "interps " + interpName(i) + " applies to rotary, not " + v.model.pos;
    if (!isLinearBias(p) && p != PositionMethod::Rotary)
      return "interps " + interpName(i) + " applies to ALiBi-family and rotary methods, not " + v.model.pos;
    try {
      checkInterpolationComposes(i, v.model.ropeScaling);
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
  }
  if (e.ntkHeads != NtkHeads::All && !isLinearBias(p))
    return "ntk_heads applies to ALiBi-family slopes, not " + v.model.pos;
  try {
    for (const auto& name : e.extensions) {
      ContextExtension x = resolveContextExtension(name, e.extensionSettings, v.model.contextLength);
      checkExtensionApplies(x, p, v.model.causal(), v.model.attentionWindow > 0);
      for (Interp i : e.interps) checkExtensionComposes(i, x);
    }
  } catch (const std::invalid_argument& ex) {
    return ex.what();
  }
  return "";
}

}  // namespace

ScenarioEval parseEval(const ScenarioSource& src, const toml::table& t, const std::vector<ScenarioVariant>& variants) {
  static const std::set<std::string> known = {
      "lvalid",           "modes", "strides", "interps",      "ntk_heads",     "max_tokens",   "batch",
      "variants",         "split", "task",    "depths",       "trials",        "filler",       "prompt_seed",
      "scale_per_length", "scale", "extend",  "extend_sinks", "extend_window", "extend_group", "extend_leak",
      "extend_limit"};
  rejectUnknown(src, t, "[eval]", known);
  ScenarioEval e;
  for (auto&& [k, node] : t) {
    std::string key(k.str());
    TomlValue v{src, key, node};
    try {
      if (key == "lvalid") {
        if (node.is_string()) {
          e.lvalids = parseLvalidRange(v.string());
        } else {
          e.lvalids = v.integers();
          for (int64_t n : e.lvalids)
            if (n < 1 || n > kMaxLvalid) v.fail("lengths must be in 1.." + std::to_string(kMaxLvalid));
          std::sort(e.lvalids.begin(), e.lvalids.end());
          e.lvalids.erase(std::unique(e.lvalids.begin(), e.lvalids.end()), e.lvalids.end());
        }
      } else if (key == "modes") {
        e.modes = v.strings();
        for (const auto& m : e.modes)
          if (m != "nonoverlap" && m != "sliding" && m != "pll")
            v.fail("unknown mode '" + m + "' (valid: nonoverlap, sliding, pll)");
      } else if (key == "strides") {
        e.strides = v.integers();
        for (int64_t s : e.strides)
          if (s < 1) v.fail("strides must be >= 1");
      } else if (key == "interps") {
        e.interps.clear();
        for (const auto& name : v.strings()) e.interps.push_back(parseInterp(name));
      } else if (key == "extend") {
        e.extensions = v.strings();
        for (const auto& name : e.extensions) resolveContextExtension(name, {}, 1 << 20);  // a bad name, here
      } else if (key == "extend_sinks") {
        e.extensionSettings.sinkTokens = v.integer();
      } else if (key == "extend_window") {
        e.extensionSettings.window = v.integer();
      } else if (key == "extend_group") {
        e.extensionSettings.group = v.integer();
      } else if (key == "extend_leak") {
        e.extensionSettings.leak = v.number();
      } else if (key == "extend_limit") {
        e.extensionSettings.distanceLimit = v.integer();
      } else if (key == "scale") {
        e.scale = v.number();
        if (!(e.scale >= 1)) v.fail("must be >= 1");
      } else if (key == "scale_per_length") {
        e.scalePerLength = v.boolean();
      } else if (key == "ntk_heads") {
        e.ntkHeads = parseNtkHeads(v.string());
      } else if (key == "split") {
        e.split = v.string();
        if (e.split != "valid" && e.split != "test") v.fail("must be valid or test");
      } else if (key == "max_tokens") {
        e.maxTokens = v.integer();
        if (e.maxTokens < 0) v.fail("must be >= 0");
      } else if (key == "batch") {
        e.batch = v.integer();
        if (e.batch < 1) v.fail("must be >= 1");
      } else if (key == "variants") {
        e.variants = v.strings();
        checkVariantNames(v, e.variants, variants);
      } else if (key == "task") {
        e.task = v.string();
        if (e.task != "perplexity") parseRetrievalTask(e.task);
      } else if (key == "depths") {
        if (node.is_string()) {
          e.depths = parseDepthList(v.string());
        } else {
          std::string list;
          for (int64_t d : v.integers()) list += (list.empty() ? "" : ",") + std::to_string(d);
          e.depths = parseDepthList(list);
        }
      } else if (key == "trials") {
        e.trials = v.integer();
        if (e.trials < 1) v.fail("must be >= 1");
      } else if (key == "filler") {
        e.filler = fillerName(parseFiller(v.string()));
      } else if (key == "prompt_seed") {
        e.promptSeed = uint64_t(v.integer());
      }
    } catch (const std::invalid_argument& ex) {
      std::string what = ex.what();
      if (what.rfind(src.name + ":", 0) == 0) throw;  // already located
      v.fail(what);
    }
  }
  if (e.lvalids.empty()) src.fail(t.source(), "[eval] needs lvalid");
  if (!e.retrieval())
    for (const char* key : {"depths", "trials", "filler", "prompt_seed"})
      if (t.contains(key)) src.fail(t.get(key)->source(), std::string(key) + " applies to the retrieval tasks");
  if (e.retrieval())
    for (const char* key : {"modes", "strides"})
      if (t.contains(key)) src.fail(t.get(key)->source(), std::string(key) + " applies to task perplexity");
  if (t.contains("filler") && !(e.retrieval() && usesFiller(parseRetrievalTask(e.task))))
    src.fail(t.get("filler")->source(), "filler applies to the retrieval tasks but kv-lines");
  if (e.modes.empty() || e.interps.empty()) src.fail(t.source(), "[eval] modes and interps must not be empty");
  if (e.extensions.empty()) src.fail(t.get("extend")->source(), "extend must not be empty");
  try {
    checkExtensionSettingsUsed(e.extensions, e.extensionSettings);
  } catch (const std::invalid_argument& ex) {
    src.fail(t.source(), std::string("[eval] ") + ex.what());
  }
  bool anyNtk = std::any_of(e.interps.begin(), e.interps.end(),
                            [](Interp i) { return i == Interp::Ntk || i == Interp::DynamicNtk; });
  if (e.ntkHeads != NtkHeads::All && !anyNtk)
    src.fail(t.get("ntk_heads")->source(), "ntk_heads applies to interps ntk and dynamic-ntk");
  if (e.scalePerLength && std::none_of(e.interps.begin(), e.interps.end(), usesFixedScale))
    src.fail(t.get("scale_per_length")->source(), "scale_per_length applies to interps linear, ntk and yarn");
  if (e.scale > 0 && std::none_of(e.interps.begin(), e.interps.end(), usesFixedScale))
    src.fail(t.get("scale")->source(), "scale applies to interps linear, ntk and yarn");
  if (e.scale > 0 && e.scalePerLength)
    src.fail(t.get("scale")->source(), "scale and scale_per_length exclude each other");
  for (const ScenarioVariant& v : variants) {
    bool selected = e.variants.empty() || std::find(e.variants.begin(), e.variants.end(), v.name) != e.variants.end();
    std::string why = selected ? evalProblem(v, e) : "";
    if (!why.empty()) src.fail(t.source(), "[eval] variant '" + v.name + "': " + why);
  }
  return e;
}

}  // namespace xtrap
