#include "run/rope_config.h"

#include <cmath>
#include <optional>
#include <stdexcept>
#include <vector>

namespace xtrap {

namespace {

using nlohmann::json;

// One object of config.json and the name it has in errors ("rope_scaling", "rope_parameters.full_attention").
struct Keys {
  const json& object;
  std::string file, prefix;

  [[noreturn]] void fail(const std::string& key, const std::string& why) const {
    throw std::runtime_error(file + ": " + prefix + key + " " + why);
  }
  // The key's value, or nullptr when absent or null (transformers' `.get(key)` is None for both).
  const json* find(const std::string& key) const {
    auto it = object.find(key);
    return it == object.end() || it->is_null() ? nullptr : &*it;
  }
  std::optional<double> number(const std::string& key) const {
    const json* v = find(key);
    if (!v) return std::nullopt;
    if (!v->is_number()) fail(key, "must be a number, got " + v->dump());
    auto x = v->get<double>();
    if (!std::isfinite(x)) fail(key, "must be finite");
    return x;
  }
  double required(const std::string& key) const {
    if (auto v = number(key)) return *v;
    fail(key, "is missing");
  }
  std::optional<int64_t> positiveInteger(const std::string& key) const {
    const json* v = find(key);
    if (!v) return std::nullopt;
    if (!v->is_number_integer() || v->get<int64_t>() < 1) fail(key, "must be a positive integer, got " + v->dump());
    return v->get<int64_t>();
  }
  std::vector<double> numbers(const std::string& key) const {
    const json* v = find(key);
    if (!v) fail(key, "is missing");
    if (!v->is_array()) fail(key, "must be a list of numbers");
    std::vector<double> list;
    for (const json& x : *v) {
      if (!x.is_number()) fail(key, "must be a list of numbers, got " + x.dump());
      list.push_back(x.get<double>());
    }
    return list;
  }
  std::string type() const {
    for (const char* key : {"rope_type", "type"})
      if (const json* v = find(key)) {
        if (!v->is_string()) fail(key, "must be a string");
        return v->get<std::string>();
      }
    return "default";
  }
};

// The per-layer form: every key a layer type, every value an object.
bool perLayer(const json& dict) {
  if (dict.empty()) return false;
  for (const auto& [key, value] : dict.items())
    if ((key != "full_attention" && key != "sliding_attention") || !value.is_object()) return false;
  return true;
}

}  // namespace

RopeConfig readRopeConfig(const json& config, const std::string& file, int64_t headDim,
                          const RopeConfigOptions& options) {
  if (!config.is_object()) throw std::runtime_error(file + " is not a JSON object");
  const Keys top{config, file, ""};
  // rope_scaling when non-empty, else rope_parameters (transformers: `rope_scaling or rope_parameters`).
  std::string dictName = "rope_scaling";
  const json* dict = top.find("rope_scaling");
  if (!dict || (dict->is_object() && dict->empty())) dictName = "rope_parameters", dict = top.find("rope_parameters");
  static const json empty = json::object();
  if (dict && !dict->is_object()) top.fail(dictName, "must be an object");
  if (!dict) dict = &empty;

  RopeConfig r;
  auto localBase = top.number("rope_local_base_freq");
  const json* global = dict;
  if (perLayer(*dict)) {
    if (!dict->contains("full_attention")) top.fail(dictName, "has no full_attention entry");
    global = &dict->at("full_attention");
    if (dict->contains("sliding_attention")) {
      const Keys sliding{dict->at("sliding_attention"), file, dictName + ".sliding_attention."};
      if (sliding.type() != "default")
        sliding.fail("rope_type", "'" + sliding.type() + "' is not supported (unscaled only)");
      localBase = sliding.number("rope_theta");
    }
    dictName += ".full_attention";
  }
  const Keys k{*global, file, dictName + "."};

  r.base = k.number("rope_theta").value_or(top.number("rope_theta").value_or(options.defaultTheta));
  if (!(r.base > 1)) (k.find("rope_theta") ? k : top).fail("rope_theta", "must be > 1");
  if (localBase) {
    if (!(*localBase > 1)) top.fail("rope_local_base_freq", "must be > 1");
    r.localBase = *localBase;
  }
  r.rotaryFraction = top.number("partial_rotary_factor").value_or(k.number("partial_rotary_factor").value_or(1.0));
  if (!(r.rotaryFraction > 0 && r.rotaryFraction <= 1)) top.fail("partial_rotary_factor", "must be in (0, 1]");
  for (const char* refused : {"mrope_section", "short_mscale", "long_mscale"})
    if (k.find(refused)) k.fail(refused, "is not supported");

  RopeScaling& s = r.scaling;
  s.type = k.type();
  if (s.type == "su" || (options.yarnMeansLongrope && s.type == "yarn")) s.type = "longrope";
  const auto maxPositions = top.positiveInteger("max_position_embeddings");
  auto needMaxPositions = [&] {
    if (!maxPositions) top.fail("max_position_embeddings", "is missing (rope type " + s.type + " needs it)");
    return *maxPositions;
  };
  if (s.type == "dynamic") {
    s.originalMaxPositions = needMaxPositions();
  } else if (s.type == "yarn" || s.type == "longrope" || s.type == "llama3") {
    auto original = top.positiveInteger("original_max_position_embeddings");
    if (!original) original = k.positiveInteger("original_max_position_embeddings");
    s.originalMaxPositions = original ? *original : needMaxPositions();
  }
  if (s.type == "linear" || s.type == "dynamic" || s.type == "llama3") s.factor = k.required("factor");
  if (s.type == "yarn" || s.type == "longrope") {
    auto factor = k.number("factor");
    s.factor = factor ? *factor : double(needMaxPositions()) / double(s.originalMaxPositions);
    if (auto a = k.number("attention_factor")) {
      if (!(*a > 0)) k.fail("attention_factor", "must be > 0");
      s.attentionFactor = *a;
    }
  }
  if (s.type == "yarn") {
    // transformers: `get("beta_fast") or 32`, so a 0 is the default too.
    s.betaFast = k.number("beta_fast").value_or(0.0);
    s.betaSlow = k.number("beta_slow").value_or(0.0);
    if (s.betaFast == 0) s.betaFast = 32.0;
    if (s.betaSlow == 0) s.betaSlow = 1.0;
    s.mscale = k.number("mscale").value_or(0.0);
    s.mscaleAllDim = k.number("mscale_all_dim").value_or(0.0);
    if (const json* t = k.find("truncate")) {
      if (!t->is_boolean()) k.fail("truncate", "must be true or false");
      s.truncate = t->get<bool>();
    }
  }
  if (s.type == "longrope") {
    s.shortFactor = k.numbers("short_factor");
    s.longFactor = k.numbers("long_factor");
  }
  if (s.type == "llama3") {
    s.lowFreqFactor = k.required("low_freq_factor");
    s.highFreqFactor = k.required("high_freq_factor");
  }
  // The rotated channels as ModelConfig::rotaryDim counts them.
  auto d = static_cast<int64_t>(double(headDim) * r.rotaryFraction);
  try {
    s.validate(d - d % 2);
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error(file + ": " + e.what() + (dictName == "rope_scaling" ? "" : " (" + dictName + ")"));
  }
  return r;
}

nlohmann::json ropeScalingJson(const RopeScaling& s) {
  json j{{"rope_type", s.type}, {"type", s.type}, {"factor", s.factor}};
  if (s.type == "yarn" || s.type == "longrope" || s.type == "llama3")
    j["original_max_position_embeddings"] = s.originalMaxPositions;
  if ((s.type == "yarn" || s.type == "longrope") && s.attentionFactor > 0) j["attention_factor"] = s.attentionFactor;
  if (s.type == "yarn") {
    j["beta_fast"] = s.betaFast;
    j["beta_slow"] = s.betaSlow;
    if (s.mscale > 0) j["mscale"] = s.mscale;
    if (s.mscaleAllDim > 0) j["mscale_all_dim"] = s.mscaleAllDim;
    j["truncate"] = s.truncate;
  }
  if (s.type == "longrope") {
    j["short_factor"] = s.shortFactor;
    j["long_factor"] = s.longFactor;
  }
  if (s.type == "llama3") {
    j["low_freq_factor"] = s.lowFreqFactor;
    j["high_freq_factor"] = s.highFreqFactor;
  }
  return j;
}

}  // namespace xtrap
