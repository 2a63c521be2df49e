#include "scenario/variant_keys.h"

#include <algorithm>
#include <functional>
#include <map>
#include <stdexcept>

#include "data/retrieval_prompt.h"
#include "data/task_mix.h"
#include "model/named_configs.h"
#include "run/adapt_config.h"
#include "run/pretrained_config.h"
#include "util/device_names.h"

namespace xtrap {
namespace fs = std::filesystem;

namespace {

using Setter = std::function<void(const TomlValue&, ScenarioVariant&)>;

// Model and training keys, accepted in [train] and in every [[variant]].
const std::map<std::string, Setter>& configKeys() {
  static const std::map<std::string, Setter> keys = {
      {"data", [](const TomlValue& v, ScenarioVariant& s) { s.train.dataDir = v.src.path(v.string()).string(); }},
      {"arch", [](const TomlValue& v, ScenarioVariant& s) { s.model.arch = v.string(); }},
      {"pos", [](const TomlValue& v, ScenarioVariant& s) { s.model.pos = v.string(); }},
      {"head", [](const TomlValue& v, ScenarioVariant& s) { s.model.head = v.string(); }},
      {"L", [](const TomlValue& v, ScenarioVariant& s) { s.model.contextLength = v.integer(); }},
      {"layers", [](const TomlValue& v, ScenarioVariant& s) { s.model.layers = v.integer(); }},
      {"d_model", [](const TomlValue& v, ScenarioVariant& s) { s.model.dModel = v.integer(); }},
      {"heads", [](const TomlValue& v, ScenarioVariant& s) { s.model.heads = v.integer(); }},
      {"ffn", [](const TomlValue& v, ScenarioVariant& s) { s.model.ffn = v.integer(); }},
      {"dropout", [](const TomlValue& v, ScenarioVariant& s) { s.model.dropout = v.number(); }},
      {"attention_dropout", [](const TomlValue& v, ScenarioVariant& s) { s.model.attentionDropout = v.number(); }},
      {"activation_dropout", [](const TomlValue& v, ScenarioVariant& s) { s.model.activationDropout = v.number(); }},
      {"activation", [](const TomlValue& v, ScenarioVariant& s) { s.model.activation = v.string(); }},
      {"final_norm", [](const TomlValue& v, ScenarioVariant& s) { s.model.finalNorm = v.boolean(); }},
      {"adaptive_softmax_dropout",
       [](const TomlValue& v, ScenarioVariant& s) { s.model.adaptiveSoftmaxDropout = v.number(); }},
      {"adaptive_input", [](const TomlValue& v, ScenarioVariant& s) { s.model.adaptiveInput = v.boolean(); }},
      {"max_positions", [](const TomlValue& v, ScenarioVariant& s) { s.model.maxPositions = v.integer(); }},
      {"adaptive_softmax_cutoffs",
       [](const TomlValue& v, ScenarioVariant& s) { s.model.adaptiveSoftmaxCutoffs = v.integers(); }},
      {"scale_embedding", [](const TomlValue& v, ScenarioVariant& s) { s.model.scaleEmbedding = v.boolean(); }},
      {"clap_beta", [](const TomlValue& v, ScenarioVariant& s) { s.model.clapBeta = v.number(); }},
      {"alibi_init", [](const TomlValue& v, ScenarioVariant& s) { s.model.alibiInit = v.string(); }},
      {"bos", [](const TomlValue& v, ScenarioVariant& s) { s.model.bos = v.boolean(); }},
      {"rotary_base", [](const TomlValue& v, ScenarioVariant& s) { s.model.rotaryBase = v.number(); }},
      {"t5_buckets", [](const TomlValue& v, ScenarioVariant& s) { s.model.t5Buckets = v.integer(); }},
      {"t5_max_distance", [](const TomlValue& v, ScenarioVariant& s) { s.model.t5MaxDistance = v.integer(); }},
      {"init_seed", [](const TomlValue& v, ScenarioVariant& s) { s.model.initSeed = v.seed(); }},
      {"steps", [](const TomlValue& v, ScenarioVariant& s) { s.train.steps = v.integer(); }},
      {"tokens", [](const TomlValue& v, ScenarioVariant& s) { s.train.tokens = v.integer(); }},
      {"batch", [](const TomlValue& v, ScenarioVariant& s) { s.train.batchSequences = v.integer(); }},
      {"batch_tokens", [](const TomlValue& v, ScenarioVariant& s) { s.train.batchTokens = v.integer(); }},
      {"lr", [](const TomlValue& v, ScenarioVariant& s) { s.train.lr = v.number(); }},
      {"min_lr_ratio", [](const TomlValue& v, ScenarioVariant& s) { s.train.minLrRatio = v.number(); }},
      {"warmup", [](const TomlValue& v, ScenarioVariant& s) { s.train.warmupSteps = v.integer(); }},
      {"schedule", [](const TomlValue& v, ScenarioVariant& s) { s.train.schedule = v.string(); }},
      {"weight_decay", [](const TomlValue& v, ScenarioVariant& s) { s.train.weightDecay = v.number(); }},
      {"adam_betas",
       [](const TomlValue& v, ScenarioVariant& s) {
         std::vector<double> betas = v.numbers();
         if (betas.size() != 2) v.fail("expected [beta1, beta2]");
         s.train.beta1 = betas[0], s.train.beta2 = betas[1];
       }},
      {"clip", [](const TomlValue& v, ScenarioVariant& s) { s.train.clipNorm = v.number(); }},
      {"seed", [](const TomlValue& v, ScenarioVariant& s) { s.train.seed = v.seed(); }},
      {"threads", [](const TomlValue& v, ScenarioVariant& s) { s.train.threads = v.integer(); }},
      {"batch_order", [](const TomlValue& v, ScenarioVariant& s) { s.train.batchOrder = v.string(); }},
      {"accumulate", [](const TomlValue& v, ScenarioVariant& s) { s.train.accumulate = v.integer(); }},
      {"log_every", [](const TomlValue& v, ScenarioVariant& s) { s.train.logEvery = v.integer(); }},
      {"eval_every", [](const TomlValue& v, ScenarioVariant& s) { s.train.evalEvery = v.integer(); }},
      {"eval_tokens", [](const TomlValue& v, ScenarioVariant& s) { s.train.evalTokens = v.integer(); }},
      {"checkpoint_every", [](const TomlValue& v, ScenarioVariant& s) { s.train.checkpointEvery = v.integer(); }},
      {"mask_prob", [](const TomlValue& v, ScenarioVariant& s) { s.train.maskProb = v.number(); }},
      {"device", [](const TomlValue& v, ScenarioVariant& s) { s.train.device = v.choice(checkDeviceName); }},
      {"dtype", [](const TomlValue& v, ScenarioVariant& s) { s.train.dtype = v.choice(checkDtypeName); }},
      {"task_mix",
       [](const TomlValue& v, ScenarioVariant& s) { s.train.taskMix = taskMixSpec(parseTaskMix(v.string())); }},
      {"task_filler",
       [](const TomlValue& v, ScenarioVariant& s) { s.train.taskFiller = fillerName(parseFiller(v.string())); }},
  };
  return keys;
}

// The keys above that set the model, not its training: an adapted variant's model is its source's.
const std::set<std::string>& modelKeys() {
  static const std::set<std::string> keys = {"arch",
                                             "config",
                                             "pos",
                                             "head",
                                             "layers",
                                             "d_model",
                                             "heads",
                                             "ffn",
                                             "dropout",
                                             "attention_dropout",
                                             "activation_dropout",
                                             "activation",
                                             "final_norm",
                                             "adaptive_softmax_dropout",
                                             "adaptive_input",
                                             "max_positions",
                                             "adaptive_softmax_cutoffs",
                                             "scale_embedding",
                                             "clap_beta",
                                             "alibi_init",
                                             "bos",
                                             "rotary_base",
                                             "t5_buckets",
                                             "t5_max_distance",
                                             "init_seed"};
  return keys;
}

}  // namespace

// Applies a [train] or [[variant]] table's keys; `extra` lists keys the caller reads itself.
void applyConfigTable(const ScenarioSource& src, const toml::table& t, const std::string& where,
                      const std::set<std::string>& extra, ScenarioVariant& v) {
  static const std::string configKey = "config";
  if (const toml::node* named = t.get(configKey)) {
    TomlValue value{src, configKey, *named};
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
    it->second(TomlValue{src, key, node}, v);
  }
}

const std::set<std::string>& pretrainedVariantKeys() {
  static const std::set<std::string> keys = {"data", "device", "dtype", "threads", "train_length"};
  return keys;
}

void applyPretrainedVariant(const ScenarioSource& src, const toml::table& t, ScenarioVariant& v) {
  static const std::string modelKey = "model";
  TomlValue model{src, modelKey, *t.get(modelKey)};
  fs::path dir = src.path(model.string());
  if (!fs::is_directory(dir)) model.fail("no model directory " + dir.string());
  if (fs::exists(dir / "run.json"))
    model.fail(dir.string() + " is an xtrap run directory; model names a Hugging Face model directory");
  if (!isPretrainedDirectory(dir)) model.fail(dir.string() + " is not a Hugging Face model directory (no config.json)");
  try {
    PretrainedConfig config = readPretrainedConfig(dir);
    v.model = config.model;
    v.pretrainedType = config.modelType;
    v.weightsDigest = pretrainedWeightsDigest(dir);
  } catch (const std::runtime_error& e) {
    model.fail(e.what());
  }
  v.pretrainedDir = dir.string();
  for (auto&& [k, node] : t) {
    std::string key(k.str());
    if (key == "name" || key == modelKey) continue;
    if (!pretrainedVariantKeys().count(key))
      src.fail(k.source(), "'" + key + "' does not apply to variant '" + v.name +
                               "', which evaluates the pretrained model " + dir.string() +
                               " (it takes name, model, data, device, dtype, threads, train_length)");
    TomlValue value{src, key, node};
    if (key == "train_length") {
      // The training length its config does not record (mosaic-bert-base: 128).
      v.model.contextLength = value.integer();
      if (v.model.contextLength < 1) value.fail("train_length must be >= 1");
      v.trainLength = v.model.contextLength;
      continue;
    }
    configKeys().at(key)(value, v);
  }
}

const std::set<std::string>& initVariantKeys() {
  static const std::set<std::string> keys = {"init", "interp", "scale", "recipe"};
  return keys;
}

void applyInitVariant(const ScenarioSource& src, const toml::table& t, const std::vector<ScenarioVariant>& earlier,
                      ScenarioVariant& v) {
  const std::string where = "variant '" + v.name + "'";
  TomlValue init{src, "init", *t.get("init")};
  std::string sourceName = init.string();
  auto found =
      std::find_if(earlier.begin(), earlier.end(), [&](const ScenarioVariant& e) { return e.name == sourceName; });
  if (found == earlier.end()) init.fail("no variant named '" + sourceName + "' before " + where);
  const ScenarioVariant& source = *found;
  if (source.pretrained() && !source.model.causal())
    init.fail("'" + sourceName + "' is a pretrained encoder; init from a pretrained model takes decoders");
  if (source.repeated) init.fail("'" + sourceName + "' has seeds; init takes a variant trained once");
  if (t.contains("seeds")) src.fail(t.get("seeds")->source(), where + ": seeds do not apply to a variant with init");
  for (auto&& [k, node] : t)
    if (modelKeys().count(std::string(k.str())))
      src.fail(k.source(), "'" + std::string(k.str()) + "' does not apply to " + where +
                               ", whose model is its init variant's (only L changes)");
  if (!t.contains("L")) src.fail(t.source(), where + ": init needs L, the length to adapt to");
  std::set<std::string> extra = initVariantKeys();
  extra.insert("name");
  applyConfigTable(src, t, "[[variant]] '" + v.name + "'", extra, v);

  Interp interp = Interp::None;
  if (const toml::node* node = t.get("interp")) {
    TomlValue value{src, "interp", *node};
    try {
      interp = parseInterp(value.string());
    } catch (const std::invalid_argument& e) {
      value.fail(e.what());
    }
  }
  double a = defaultAdaptScale(v.model.contextLength, source.model.contextLength);
  if (const toml::node* node = t.get("scale")) {
    TomlValue value{src, "scale", *node};
    if (interp == Interp::None) value.fail("applies with an interp other than none");
    a = value.number();
  }
  if (interp == Interp::None) a = 1.0;
  if (const toml::node* node = t.get("recipe")) {
    TomlValue value{src, "recipe", *node};
    try {
      applyAdaptRecipe(value.string(), v.train, [&t](const std::string& key) { return t.contains(key); });
    } catch (const std::invalid_argument& e) {
      value.fail(e.what());
    }
  }
  // A pretrained model reads any text through its tokenizer; a run's words are its embedding's rows.
  if (!source.pretrained() && v.train.dataDir != source.train.dataDir)
    src.fail(t.source(), where + ": its data must be its init variant's (" + source.train.dataDir +
                             "): the words are the embedding's rows");
  try {
    v.model = adaptedModelConfig(source.model, v.model.contextLength, interp, a);
  } catch (const std::invalid_argument& e) {
    src.fail(t.source(), where + ": " + e.what());
  }
  v.initVariant = sourceName;
  v.train.initStep = source.pretrained() ? 0 : source.train.totalSteps(source.model.contextLength);
  v.train.initInterp = interpName(interp);
  v.train.initScale = a;
}

// The `seeds` list of a table (empty when absent): distinct seeds >= 0, at least one.
std::vector<uint64_t> parseSeeds(const ScenarioSource& src, const toml::table& t) {
  const toml::node* node = t.get("seeds");
  if (!node) return {};
  TomlValue v{src, "seeds", *node};
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

void checkVariantNames(const TomlValue& v, const std::vector<std::string>& names,
                       const std::vector<ScenarioVariant>& variants) {
  for (const auto& n : names) {
    bool found = std::any_of(variants.begin(), variants.end(), [&](const ScenarioVariant& s) { return s.name == n; });
    if (!found) v.fail("no variant named '" + n + "'");
  }
}

}  // namespace xtrap
