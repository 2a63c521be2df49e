#include "scenario/scenario.h"

#include <fmt/format.h>
#include <toml++/toml.h>

#include <algorithm>
#include <functional>
#include <map>
#include <set>
#include <stdexcept>

#include "data/retrieval_prompt.h"
#include "data/task_mix.h"
#include "data/wikitext.h"
#include "eval/depth_list.h"
#include "eval/lvalid_range.h"
#include "model/named_configs.h"
#include "model/position_method.h"
#include "util/atomic_file.h"
#include "util/device_names.h"

namespace xtrap {
namespace fs = std::filesystem;

namespace {

// Context for one parse: where errors point and where relative paths start.
struct Source {
  std::string name;
  fs::path baseDir;

  std::string at(const toml::source_region& r) const {
    return fmt::format("{}:{}:{}", name, r.begin.line, r.begin.column);
  }
  // toml++'s descriptions quote the offending text, newlines included (found by fuzz_scenario),
  // and values are echoed as written: escape control characters so the error stays one line.
  [[noreturn]] void fail(const toml::source_region& r, const std::string& why) const {
    std::string line;
    for (unsigned char c : why)
      line += c == '\n' ? "\\n" : c < 0x20 || c == 0x7f ? fmt::format("\\x{:02x}", c) : std::string(1, char(c));
    throw std::invalid_argument(at(r) + ": " + line);
  }
};

// One `key = value` with typed accessors that fail naming the key and its position.
struct Value {
  const Source& src;
  const std::string& key;
  const toml::node& node;

  [[noreturn]] void fail(const std::string& why) const { src.fail(node.source(), key + ": " + why); }
  int64_t integer() const {
    if (auto* v = node.as_integer()) return v->get();
    fail("expected an integer");
  }
  double number() const {
    if (auto* v = node.as_floating_point()) return v->get();
    if (auto* v = node.as_integer()) return double(v->get());
    fail("expected a number");
  }
  bool boolean() const {
    if (auto* v = node.as_boolean()) return v->get();
    fail("expected true or false");
  }
  std::string string() const {
    if (auto* v = node.as_string()) return v->get();
    fail("expected a string");
  }
  std::vector<int64_t> integers() const {
    std::vector<int64_t> out;
    auto* a = node.as_array();
    if (!a) fail("expected a list of integers");
    for (const auto& item : *a) {
      if (!item.is_integer()) fail("expected a list of integers");
      out.push_back(item.as_integer()->get());
    }
    return out;
  }
  std::vector<std::string> strings() const {
    std::vector<std::string> out;
    auto* a = node.as_array();
    if (!a) fail("expected a list of strings");
    for (const auto& item : *a) {
      if (!item.is_string()) fail("expected a list of strings");
      out.push_back(item.as_string()->get());
    }
    return out;
  }
  // A string `check` accepts (it throws a one-line std::invalid_argument naming the choices).
  std::string choice(void (*check)(const std::string&)) const {
    std::string s = string();
    try {
      check(s);
    } catch (const std::invalid_argument& e) {
      fail(e.what());
    }
    return s;
  }
  uint64_t seed() const {
    int64_t s = integer();
    if (s < 0) fail("must be >= 0");
    return uint64_t(s);
  }
};

using Setter = std::function<void(const Value&, ScenarioVariant&)>;

// Model and training keys, accepted in [train] and in every [[variant]].
const std::map<std::string, Setter>& configKeys() {
  static const std::map<std::string, Setter> keys = {
      {"data",
       [](const Value& v, ScenarioVariant& s) {
         fs::path p = v.string();
         s.train.dataDir = (p.is_absolute() ? p : (v.src.baseDir / p).lexically_normal()).string();
       }},
      {"arch", [](const Value& v, ScenarioVariant& s) { s.model.arch = v.string(); }},
      {"pos", [](const Value& v, ScenarioVariant& s) { s.model.pos = v.string(); }},
      {"head", [](const Value& v, ScenarioVariant& s) { s.model.head = v.string(); }},
      {"L", [](const Value& v, ScenarioVariant& s) { s.model.contextLength = v.integer(); }},
      {"layers", [](const Value& v, ScenarioVariant& s) { s.model.layers = v.integer(); }},
      {"d_model", [](const Value& v, ScenarioVariant& s) { s.model.dModel = v.integer(); }},
      {"heads", [](const Value& v, ScenarioVariant& s) { s.model.heads = v.integer(); }},
      {"ffn", [](const Value& v, ScenarioVariant& s) { s.model.ffn = v.integer(); }},
      {"dropout", [](const Value& v, ScenarioVariant& s) { s.model.dropout = v.number(); }},
      {"attention_dropout", [](const Value& v, ScenarioVariant& s) { s.model.attentionDropout = v.number(); }},
      {"activation_dropout", [](const Value& v, ScenarioVariant& s) { s.model.activationDropout = v.number(); }},
      {"activation", [](const Value& v, ScenarioVariant& s) { s.model.activation = v.string(); }},
      {"final_norm", [](const Value& v, ScenarioVariant& s) { s.model.finalNorm = v.boolean(); }},
      {"adaptive_softmax_dropout",
       [](const Value& v, ScenarioVariant& s) { s.model.adaptiveSoftmaxDropout = v.number(); }},
      {"adaptive_input", [](const Value& v, ScenarioVariant& s) { s.model.adaptiveInput = v.boolean(); }},
      {"max_positions", [](const Value& v, ScenarioVariant& s) { s.model.maxPositions = v.integer(); }},
      {"adaptive_softmax_cutoffs",
       [](const Value& v, ScenarioVariant& s) { s.model.adaptiveSoftmaxCutoffs = v.integers(); }},
      {"scale_embedding", [](const Value& v, ScenarioVariant& s) { s.model.scaleEmbedding = v.boolean(); }},
      {"clap_beta", [](const Value& v, ScenarioVariant& s) { s.model.clapBeta = v.number(); }},
      {"alibi_init", [](const Value& v, ScenarioVariant& s) { s.model.alibiInit = v.string(); }},
      {"bos", [](const Value& v, ScenarioVariant& s) { s.model.bos = v.boolean(); }},
      {"rotary_base", [](const Value& v, ScenarioVariant& s) { s.model.rotaryBase = v.number(); }},
      {"t5_buckets", [](const Value& v, ScenarioVariant& s) { s.model.t5Buckets = v.integer(); }},
      {"t5_max_distance", [](const Value& v, ScenarioVariant& s) { s.model.t5MaxDistance = v.integer(); }},
      {"init_seed", [](const Value& v, ScenarioVariant& s) { s.model.initSeed = v.seed(); }},
      {"steps", [](const Value& v, ScenarioVariant& s) { s.train.steps = v.integer(); }},
      {"tokens", [](const Value& v, ScenarioVariant& s) { s.train.tokens = v.integer(); }},
      {"batch", [](const Value& v, ScenarioVariant& s) { s.train.batchSequences = v.integer(); }},
      {"batch_tokens", [](const Value& v, ScenarioVariant& s) { s.train.batchTokens = v.integer(); }},
      {"lr", [](const Value& v, ScenarioVariant& s) { s.train.lr = v.number(); }},
      {"min_lr_ratio", [](const Value& v, ScenarioVariant& s) { s.train.minLrRatio = v.number(); }},
      {"warmup", [](const Value& v, ScenarioVariant& s) { s.train.warmupSteps = v.integer(); }},
      {"schedule", [](const Value& v, ScenarioVariant& s) { s.train.schedule = v.string(); }},
      {"weight_decay", [](const Value& v, ScenarioVariant& s) { s.train.weightDecay = v.number(); }},
      {"clip", [](const Value& v, ScenarioVariant& s) { s.train.clipNorm = v.number(); }},
      {"seed", [](const Value& v, ScenarioVariant& s) { s.train.seed = v.seed(); }},
      {"threads", [](const Value& v, ScenarioVariant& s) { s.train.threads = v.integer(); }},
      {"batch_order", [](const Value& v, ScenarioVariant& s) { s.train.batchOrder = v.string(); }},
      {"log_every", [](const Value& v, ScenarioVariant& s) { s.train.logEvery = v.integer(); }},
      {"eval_every", [](const Value& v, ScenarioVariant& s) { s.train.evalEvery = v.integer(); }},
      {"eval_tokens", [](const Value& v, ScenarioVariant& s) { s.train.evalTokens = v.integer(); }},
      {"checkpoint_every", [](const Value& v, ScenarioVariant& s) { s.train.checkpointEvery = v.integer(); }},
      {"mask_prob", [](const Value& v, ScenarioVariant& s) { s.train.maskProb = v.number(); }},
      {"device", [](const Value& v, ScenarioVariant& s) { s.train.device = v.choice(checkDeviceName); }},
      {"dtype", [](const Value& v, ScenarioVariant& s) { s.train.dtype = v.choice(checkDtypeName); }},
      {"task_mix", [](const Value& v, ScenarioVariant& s) { s.train.taskMix = taskMixSpec(parseTaskMix(v.string())); }},
      {"task_filler",
       [](const Value& v, ScenarioVariant& s) { s.train.taskFiller = fillerName(parseFiller(v.string())); }},
  };
  return keys;
}

const toml::table& asTable(const Source& src, const toml::node& node, const std::string& what) {
  if (auto* t = node.as_table()) return *t;
  src.fail(node.source(), what + ": expected a table");
}

// Applies a [train] or [[variant]] table's keys; `extra` lists keys the caller reads itself.
void applyConfigTable(const Source& src, const toml::table& t, const std::string& where,
                      const std::set<std::string>& extra, ScenarioVariant& v) {
  static const std::string configKey = "config";
  if (const toml::node* named = t.get(configKey)) {
    Value value{src, configKey, *named};
    try {
      applyNamedConfig(value.string(), v.model);
    } catch (const std::invalid_argument& e) {
      value.fail(e.what());
    }
  }
  for (auto&& [k, node] : t) {
    std::string key(k.str());
    if (key == configKey || extra.count(key)) continue;
    auto it = configKeys().find(key);
    if (it == configKeys().end()) src.fail(k.source(), "unknown key '" + key + "' in " + where);
    it->second(Value{src, key, node}, v);
  }
}

// Checks that every key of `t` is in `known`.
void rejectUnknown(const Source& src, const toml::table& t, const std::string& where,
                   const std::set<std::string>& known) {
  for (auto&& [k, node] : t)
    if (!known.count(std::string(k.str())))
      src.fail(k.source(), "unknown key '" + std::string(k.str()) + "' in " + where);
}

void checkVariantNames(const Source& src, const Value& v, const std::vector<std::string>& names,
                       const std::vector<ScenarioVariant>& variants) {
  for (const auto& n : names) {
    bool found = std::any_of(variants.begin(), variants.end(), [&](const ScenarioVariant& s) { return s.name == n; });
    if (!found) v.fail("no variant named '" + n + "'");
  }
}

// Why a variant cannot be evaluated as a block asks ("" when it can): checked while parsing so a
// scenario fails before any training, not after it.
std::string evalProblem(const ScenarioVariant& v, const ScenarioEval& e) {
  PositionMethod p = v.model.position();
  if (p == PositionMethod::Learned && e.lvalids.back() > v.model.positionTableSize())
    return fmt::format("lvalid {} exceeds its learned position table of {} rows (set max_positions)", e.lvalids.back(),
                       v.model.positionTableSize());
  if (v.model.usesBos() && e.lvalids.front() < 2) return "an encoder with <bos> needs lvalid >= 2";
  for (Interp i : e.interps) {
    if (i == Interp::None) continue;
    if (isYarn(i) && p != PositionMethod::Rotary)
      return "interps " + interpName(i) + " applies to rotary, not " + v.model.pos;
    if (!isLinearBias(p) && p != PositionMethod::Rotary)
      return "interps " + interpName(i) + " applies to ALiBi-family and rotary methods, not " + v.model.pos;
  }
  if (e.ntkHeads != NtkHeads::All && !isLinearBias(p))
    return "ntk_heads applies to ALiBi-family slopes, not " + v.model.pos;
  return "";
}

ScenarioEval parseEval(const Source& src, const toml::table& t, const std::vector<ScenarioVariant>& variants) {
  static const std::set<std::string> known = {"lvalid",     "modes",  "strides",  "interps",     "ntk_heads",
                                              "max_tokens", "batch",  "variants", "split",       "task",
                                              "depths",     "trials", "filler",   "prompt_seed", "scale_per_length"};
  rejectUnknown(src, t, "[eval]", known);
  ScenarioEval e;
  for (auto&& [k, node] : t) {
    std::string key(k.str());
    Value v{src, key, node};
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
          if (m != "nonoverlap" && m != "sliding") v.fail("unknown mode '" + m + "' (valid: nonoverlap, sliding)");
      } else if (key == "strides") {
        e.strides = v.integers();
        for (int64_t s : e.strides)
          if (s < 1) v.fail("strides must be >= 1");
      } else if (key == "interps") {
        e.interps.clear();
        for (const auto& name : v.strings()) e.interps.push_back(parseInterp(name));
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
        checkVariantNames(src, v, e.variants, variants);
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
      if (t.contains(key)) src.fail(t.get(key)->source(), std::string(key) + " applies to task passkey or kv-lines");
  if (e.retrieval())
    for (const char* key : {"modes", "strides"})
      if (t.contains(key)) src.fail(t.get(key)->source(), std::string(key) + " applies to task perplexity");
  if (e.task != "passkey" && t.contains("filler"))
    src.fail(t.get("filler")->source(), "filler applies to task passkey");
  if (e.modes.empty() || e.interps.empty()) src.fail(t.source(), "[eval] modes and interps must not be empty");
  bool anyNtk = std::any_of(e.interps.begin(), e.interps.end(),
                            [](Interp i) { return i == Interp::Ntk || i == Interp::DynamicNtk; });
  if (e.ntkHeads != NtkHeads::All && !anyNtk)
    src.fail(t.get("ntk_heads")->source(), "ntk_heads applies to interps ntk and dynamic-ntk");
  if (e.scalePerLength && std::none_of(e.interps.begin(), e.interps.end(), usesFixedScale))
    src.fail(t.get("scale_per_length")->source(), "scale_per_length applies to interps linear, ntk and yarn");
  for (const ScenarioVariant& v : variants) {
    bool selected = e.variants.empty() || std::find(e.variants.begin(), e.variants.end(), v.name) != e.variants.end();
    std::string why = selected ? evalProblem(v, e) : "";
    if (!why.empty()) src.fail(t.source(), "[eval] variant '" + v.name + "': " + why);
  }
  return e;
}

ScenarioProbe parseProbe(const Source& src, const toml::table& t, const std::vector<ScenarioVariant>& variants) {
  static const std::set<std::string> known = {"bias_len", "attn_lvalid", "attn_offset", "stats_only", "variants"};
  rejectUnknown(src, t, "[probe]", known);
  ScenarioProbe p;
  for (auto&& [k, node] : t) {
    std::string key(k.str());
    Value v{src, key, node};
    if (key == "bias_len") {
      p.biasLen = v.integer();
      if (p.biasLen < 1 || p.biasLen > 8192) v.fail("must be in 1..8192");
    } else if (key == "attn_lvalid") {
      p.attnLvalid = v.integer();
      if (p.attnLvalid < 1 || p.attnLvalid > (1 << 20)) v.fail("must be in 1..1048576");
    } else if (key == "attn_offset") {
      p.attnOffset = v.integer();
      if (p.attnOffset < 0) v.fail("must be >= 0");
    } else if (key == "stats_only") {
      p.statsOnly = v.boolean();
    } else if (key == "variants") {
      p.variants = v.strings();
      checkVariantNames(src, v, p.variants, variants);
    }
  }
  if (p.biasLen == 0 && p.attnLvalid == 0) src.fail(t.source(), "[probe] needs bias_len or attn_lvalid");
  for (const ScenarioVariant& v : variants) {
    bool selected = p.variants.empty() || std::find(p.variants.begin(), p.variants.end(), v.name) != p.variants.end();
    if (selected && v.model.position() == PositionMethod::Learned && p.attnLvalid > v.model.positionTableSize())
      src.fail(t.source(), fmt::format("[probe] variant '{}': attn_lvalid {} exceeds its learned position table of {} "
                                       "rows (set max_positions)",
                                       v.name, p.attnLvalid, v.model.positionTableSize()));
  }
  return p;
}

// The `seeds` list of a table (empty when absent): distinct seeds >= 0, at least one.
std::vector<uint64_t> parseSeeds(const Source& src, const toml::table& t) {
  const toml::node* node = t.get("seeds");
  if (!node) return {};
  Value v{src, "seeds", *node};
  std::vector<uint64_t> seeds;
  for (int64_t seed : v.integers()) {
    if (seed < 0) v.fail("seeds must be >= 0");
    if (std::find(seeds.begin(), seeds.end(), uint64_t(seed)) != seeds.end()) v.fail("duplicate seed");
    seeds.push_back(uint64_t(seed));
  }
  if (seeds.empty()) v.fail("needs at least one seed");
  return seeds;
}

bool validVariantName(const std::string& n) {
  return !n.empty() && n.size() <= 64 &&
         n.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") ==
             std::string::npos &&
         n[0] != '.';
}

}  // namespace

std::vector<const ScenarioVariant*> Scenario::select(const std::vector<std::string>& names) const {
  std::vector<const ScenarioVariant*> out;
  for (const auto& v : variants)
    if (names.empty() || std::find(names.begin(), names.end(), v.name) != names.end()) out.push_back(&v);
  return out;
}

Scenario parseScenario(const std::string& text, const std::string& source, const fs::path& baseDir) {
  Source src{source, baseDir};
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
  if (const toml::node* d = doc.get("description")) s.description = Value{src, "description", *d}.string();

  ScenarioVariant base;
  base.train.dataDir = defaultDataDir().string();
  const toml::node* train = doc.get("train");
  if (!train) throw std::invalid_argument(source + ": missing [train]");
  const toml::table& trainTable = asTable(src, *train, "train");
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
    v.name = Value{src, "name", *name}.string();
    if (!validVariantName(v.name))
      src.fail(name->source(), "name: use letters, digits, '.', '_' and '-' (up to 64), got '" + v.name + "'");
    for (const auto& other : s.variants)
      if (other.name == v.name) src.fail(name->source(), "name: duplicate variant '" + v.name + "'");
    applyConfigTable(src, t, "[[variant]] '" + v.name + "'", {"name", "seeds"}, v);
    try {
      v.model.validate();
      v.train.validate();
    } catch (const std::invalid_argument& e) {
      src.fail(t.source(), "variant '" + v.name + "': " + e.what());
    }
    std::vector<uint64_t> seeds = t.contains("seeds") ? parseSeeds(src, t) : baseSeeds;
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

Scenario loadScenario(const fs::path& file) {
  if (!fs::is_regular_file(file)) throw std::invalid_argument("no scenario file " + file.string());
  return parseScenario(readTextFile(file), file.string(), file.parent_path());
}

}  // namespace xtrap
