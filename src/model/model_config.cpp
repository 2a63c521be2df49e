#include "model/model_config.h"

#include <algorithm>
#include <stdexcept>

#include "model/linear_bias_spec.h"
#include "util/choices.h"

namespace xtrap {

const std::vector<std::string>& ModelConfig::archNames() {
  static const std::vector<std::string> names{"decoder", "encoder"};
  return names;
}
const std::vector<std::string>& ModelConfig::headNames() {
  static const std::vector<std::string> names{"lm", "roberta", "clap"};
  return names;
}
const std::vector<std::string>& ModelConfig::activationNames() {
  static const std::vector<std::string> names{"gelu", "gelu-tanh", "relu", "silu"};
  return names;
}
const std::vector<std::string>& ModelConfig::alibiInitNames() {
  static const std::vector<std::string> names{"random", "standard"};
  return names;
}

const std::vector<std::string>& ModelConfig::normNames() {
  static const std::vector<std::string> names{"layer", "rms", "rms-one-plus"};
  return names;
}
const std::vector<std::string>& ModelConfig::blockNormsNames() {
  static const std::vector<std::string> names{"pre", "sandwich", "post"};
  return names;
}

int64_t ModelConfig::layerWindow(int64_t layer) const {
  if (attentionWindow <= 0) return 0;
  if (windowedLayers.empty()) return attentionWindow;
  return std::find(windowedLayers.begin(), windowedLayers.end(), layer) != windowedLayers.end() ? attentionWindow : 0;
}

int64_t ModelConfig::rotaryDim() const {
  // transformers: int(head_dim * partial_rotary_factor), and the pairs of an even count.
  auto d = static_cast<int64_t>(double(resolvedHeadDim()) * rotaryFraction);
  return d - d % 2;
}

std::string ModelConfig::pretrainedPartsSummary() const {
  std::vector<std::string> parts;
  if (norm != "layer") parts.push_back("norm " + norm);
  if (blockNorms != "pre") parts.push_back("block norms " + blockNorms);
  if (gatedMlp) parts.push_back("gated MLP");
  if (resolvedFc1Bias() != linearBiases) parts.push_back("MLP input bias");
  if (tokenTypes > 0) parts.push_back("token-type embedding");
  if (positionOffset > 0) parts.push_back("position offset");
  if (headNormEps) parts.push_back("head norm epsilon");
  if (head == "none") parts.push_back("no output head");
  if (resolvedKvHeads() != heads) parts.push_back("grouped key/value heads");
  if (headDim > 0 && headDim * heads != dModel) parts.push_back("head dimension");
  if (resolvedQkvBias() != linearBiases) parts.push_back("q/k/v biases");
  if (qkNorm) parts.push_back("q/k norms");
  if (attentionWindow > 0) parts.push_back("sliding window");
  if (attentionSoftcap > 0 || finalSoftcap > 0) parts.push_back("soft-caps");
  if (queryScale) parts.push_back("query scale");
  if (!tiedHead) parts.push_back("untied head");
  if (embeddingScaleRounded) parts.push_back("rounded embedding scale");
  if (rotaryFraction != 1.0) parts.push_back("partial rotary");
  if (rotaryLocalBase > 0) parts.push_back("local rotary base");
  if (!ropeScaling.isDefault()) parts.push_back("rope scaling " + ropeScaling.type);
  std::string joined;
  for (const auto& p : parts) joined += (joined.empty() ? "" : ", ") + p;
  return joined;
}

OutputHeadKind ModelConfig::headKind() const {
  if (head == "none") return OutputHeadKind::None;  // pretrained encoders only: not a --head choice
  checkName(headNames(), head, "--head");
  if (head == "roberta") return OutputHeadKind::Roberta;
  if (head == "clap") return OutputHeadKind::Clap;
  return OutputHeadKind::Lm;
}

void ModelConfig::validate() const {
  auto fail = [](const std::string& why) { throw std::invalid_argument(why); };
  checkName(archNames(), arch, "--arch");
  headKind();  // throws on an unknown head
  if (layers < 1 || layers > 256) fail("--layers must be in 1..256, got " + std::to_string(layers));
  if (dModel < 2 || dModel > 65536) fail("--d-model must be in 2..65536, got " + std::to_string(dModel));
  if (heads < 1 || (headDim == 0 && dModel % heads != 0))
    fail("--heads (" + std::to_string(heads) + ") must divide --d-model (" + std::to_string(dModel) + ")");
  if (headDim < 0 || headDim > 65536) fail("the head dimension must be in 1..65536, got " + std::to_string(headDim));
  if (kvHeads < 0 || (kvHeads > 0 && heads % kvHeads != 0))
    fail("the key/value heads (" + std::to_string(kvHeads) + ") must divide the heads (" + std::to_string(heads) + ")");
  checkName(normNames(), norm, "norm");
  checkName(blockNormsNames(), blockNorms, "block norms");
  if (attentionWindow < 0) fail("the attention window must be >= 0");
  if (attentionWindow > 0 && !causal()) fail("a sliding attention window is for decoders");
  for (int64_t l : windowedLayers)
    if (l < 0 || l >= layers) fail("windowed layer " + std::to_string(l) + " is not a layer");
  if (!windowedLayers.empty() && attentionWindow == 0) fail("windowed layers need an attention window");
  if (attentionSoftcap < 0 || finalSoftcap < 0) fail("soft-caps must be >= 0");
  if (queryScale && !(*queryScale > 0)) fail("the query scale must be positive");
  if (!(rotaryFraction > 0 && rotaryFraction <= 1)) fail("the rotary fraction must be in (0, 1]");
  if (rotaryLocalBase < 0) fail("the local rotary base must be >= 0");
  if (tokenTypes < 0) fail("the token types must be >= 0");
  if (positionOffset < 0 || (positionOffset > 0 && position() != PositionMethod::Learned))
    fail("a position offset needs learned positions");
  if (headNormEps && !(*headNormEps > 0)) fail("the head's LayerNorm epsilon must be positive");
  if (head == "none" && causal()) fail("a decoder needs an output head");
  if (blockNorms == "post" && finalNorm) fail("post-norm blocks end in their own norm: no final norm");
  if (tokenTypes > 0 && !embeddingNorm) fail("token-type embeddings are added before the embedding norm (BERT's)");
  if (!tiedHead && head != "lm") fail("an untied head is an lm head");
  if (!ropeScaling.isDefault() && position() != PositionMethod::Rotary) fail("rope scaling needs pos rotary");
  if (ffn < 1) fail("--ffn must be positive");
  auto rate = [&](double p, const char* flag) {
    if (!(p >= 0.0 && p < 1.0)) fail(std::string(flag) + " must be in [0, 1)");
  };
  rate(dropout, "--dropout");
  rate(attentionDropoutRate(), "--attention-dropout");
  rate(activationDropoutRate(), "--activation-dropout");
  rate(adaptiveSoftmaxDropout, "--adaptive-softmax-dropout");
  checkName(activationNames(), activation, "--activation");
  if (contextLength < 1 || contextLength > (1 << 20))
    fail("--L must be in 1..1048576, got " + std::to_string(contextLength));
  PositionMethod m = position();
  if (m == PositionMethod::Rotary && rotaryDim() < 2) fail("rotary needs at least two rotated channels per head");
  if (isLinearBias(m)) makeLinearBiasSpec(m, heads, causal());  // throws its own reason
  if (alibiInterp != "none") {
    if (alibiInterp != "linear" && alibiInterp != "ntk")
      fail("the baked slope interpolation must be linear or ntk, not " + alibiInterp);
    if (!isLinearBias(m) || makeLinearBiasSpec(m, heads, causal()).learnedSlopes)
      fail("a baked slope interpolation needs fixed ALiBi-family slopes, not " + pos);
    if (!(alibiInterpFactor >= 1)) fail("the baked slope interpolation's factor must be >= 1");
  }
  if (!alibiInit.empty()) checkName(alibiInitNames(), alibiInit, "--alibi-init");
  if (usesBos() && contextLength < 2) fail("--L must be >= 2 with a <bos> token");
  if (causal() && bos.value_or(false)) fail("--bos is for encoders (decoders predict from an <eos> context)");
  if (!adaptiveSoftmaxCutoffs.empty()) {
    if (head != "lm") fail("adaptive softmax works with --head lm only");
    int64_t prev = 0;
    for (int64_t c : adaptiveSoftmaxCutoffs) {
      if (c <= prev || (vocabSize > 0 && c >= vocabSize))
        fail("adaptive softmax cutoffs must increase and stay below the vocabulary size");
      prev = c;
    }
    // LibTorch's tail i projects C -> floor(C / 4^(i+1)) (div value 4): at least one unit.
    int64_t width = dModel;
    for (size_t i = 0; i < adaptiveSoftmaxCutoffs.size(); ++i) width /= 4;
    if (width < 1)
      fail("adaptive softmax: --d-model " + std::to_string(dModel) + " leaves its last tail no width (d / 4^" +
           std::to_string(adaptiveSoftmaxCutoffs.size()) + " < 1)");
  }
  if (adaptiveSoftmaxDropout > 0 && adaptiveSoftmaxCutoffs.empty())
    fail("--adaptive-softmax-dropout applies to the adaptive softmax only");
  if (adaptiveInput && adaptiveSoftmaxCutoffs.empty())
    fail("--adaptive-input ties to the adaptive softmax: give --adaptive-softmax cutoffs");
  if (t5Buckets < 2 || t5MaxDistance < 2) fail("t5 buckets and max distance must be >= 2");
  if (!(normEps > 0)) fail("the LayerNorm epsilon must be positive");
  if (clipQkv && !(*clipQkv > 0)) fail("clip_qkv must be positive");
  if (alibiSlopes != "press" && alibiSlopes != "mpt") fail("ALiBi slopes are press or mpt, not " + alibiSlopes);
  if (alibiSlopes == "mpt" && (m != PositionMethod::Alibi || !(alibiBiasMax > 0)))
    fail("mpt slopes need pos alibi and a positive alibi_bias_max");
}

std::string ModelConfig::resolvedAlibiInit() const {
  if (!alibiInit.empty()) return alibiInit;
  return position() == PositionMethod::AlibiLearned ? "random" : "standard";
}

MlmTokens ModelConfig::mlmTokens(const Vocabulary& data) const {
  return {maskId(), usesBos() ? bosId() : -1, data.realWords()};
}

void to_json(nlohmann::json& j, const ModelConfig& c) {
  j = nlohmann::json{{"arch", c.arch},
                     {"vocab_size", c.vocabSize},
                     {"layers", c.layers},
                     {"d_model", c.dModel},
                     {"heads", c.heads},
                     {"ffn", c.ffn},
                     {"dropout", c.dropout},
                     {"attention_dropout", c.attentionDropoutRate()},
                     {"activation_dropout", c.activationDropoutRate()},
                     {"activation", c.activation},
                     {"final_norm", c.finalNorm},
                     {"adaptive_softmax_dropout", c.adaptiveSoftmaxDropout},
                     {"adaptive_input", c.adaptiveInput},
                     {"pos", c.pos},
                     {"L", c.contextLength},
                     {"max_positions", c.maxPositions},
                     {"head", c.head},
                     {"adaptive_softmax_cutoffs", c.adaptiveSoftmaxCutoffs},
                     {"scale_embedding", c.scaleEmbedding},
                     {"clap_beta", c.clapBeta},
                     {"alibi_init", c.resolvedAlibiInit()},
                     {"bos", c.usesBos()},
                     {"rotary_base", c.rotaryBase},
                     {"t5_buckets", c.t5Buckets},
                     {"t5_max_distance", c.t5MaxDistance},
                     {"init_seed", c.initSeed},
                     {"embedding_norm", c.embeddingNorm},
                     {"linear_biases", c.linearBiases},
                     {"norm_eps", c.normEps},
                     {"alibi_slopes", c.alibiSlopes},
                     {"alibi_bias_max", c.alibiBiasMax}};
  if (c.clipQkv) j["clip_qkv"] = *c.clipQkv;
  // The block parts only where they differ from xtrap's own blocks: a run's run.json, and the
  // identity scenarios derive from it, stay what they were before the parts existed.
  const ModelConfig d;
  if (c.norm != d.norm) j["norm"] = c.norm;
  if (c.blockNorms != d.blockNorms) j["block_norms"] = c.blockNorms;
  if (c.gatedMlp) j["gated_mlp"] = true;
  if (c.fc1Bias) j["fc1_bias"] = *c.fc1Bias;
  if (c.tokenTypes > 0) j["token_types"] = c.tokenTypes;
  if (c.positionOffset > 0) j["position_offset"] = c.positionOffset;
  if (c.headNormEps) j["head_norm_eps"] = *c.headNormEps;
  if (c.kvHeads > 0) j["kv_heads"] = c.kvHeads;
  if (c.headDim > 0) j["head_dim"] = c.headDim;
  if (c.qkvBias) j["qkv_bias"] = *c.qkvBias;
  if (c.qkNorm) j["qk_norm"] = true;
  if (c.attentionWindow > 0) j["attention_window"] = c.attentionWindow;
  if (!c.windowedLayers.empty()) j["windowed_layers"] = c.windowedLayers;
  if (c.attentionSoftcap > 0) j["attention_softcap"] = c.attentionSoftcap;
  if (c.finalSoftcap > 0) j["final_softcap"] = c.finalSoftcap;
  if (c.queryScale) j["query_scale"] = *c.queryScale;
  if (!c.tiedHead) j["tied_head"] = false;
  if (c.embeddingScaleRounded) j["embedding_scale_rounded"] = true;
  if (c.rotaryFraction != d.rotaryFraction) j["rotary_fraction"] = c.rotaryFraction;
  if (c.rotaryLocalBase > 0) j["rotary_local_base"] = c.rotaryLocalBase;
  if (!c.ropeScaling.isDefault()) j["rope_scaling"] = c.ropeScaling;
  if (c.alibiInterp != d.alibiInterp) j["alibi_interp"] = {{"interp", c.alibiInterp}, {"factor", c.alibiInterpFactor}};
}

void from_json(const nlohmann::json& j, ModelConfig& c) {
  j.at("arch").get_to(c.arch);
  j.at("vocab_size").get_to(c.vocabSize);
  j.at("layers").get_to(c.layers);
  j.at("d_model").get_to(c.dModel);
  j.at("heads").get_to(c.heads);
  j.at("ffn").get_to(c.ffn);
  j.at("dropout").get_to(c.dropout);
  // Runs from before these settings: one dropout, GELU, a final LayerNorm, token embeddings.
  c.attentionDropout = j.value("attention_dropout", c.dropout);
  c.activationDropout = j.value("activation_dropout", c.dropout);
  c.activation = j.value("activation", std::string("gelu"));
  c.finalNorm = j.value("final_norm", true);
  c.adaptiveSoftmaxDropout = j.value("adaptive_softmax_dropout", 0.0);
  c.adaptiveInput = j.value("adaptive_input", false);
  j.at("pos").get_to(c.pos);
  j.at("L").get_to(c.contextLength);
  j.at("max_positions").get_to(c.maxPositions);
  j.at("head").get_to(c.head);
  j.at("adaptive_softmax_cutoffs").get_to(c.adaptiveSoftmaxCutoffs);
  j.at("scale_embedding").get_to(c.scaleEmbedding);
  j.at("clap_beta").get_to(c.clapBeta);
  j.at("alibi_init").get_to(c.alibiInit);
  c.bos = j.value("bos", false);  // runs from before the option had no <bos>
  j.at("rotary_base").get_to(c.rotaryBase);
  j.at("t5_buckets").get_to(c.t5Buckets);
  j.at("t5_max_distance").get_to(c.t5MaxDistance);
  j.at("init_seed").get_to(c.initSeed);
  c.embeddingNorm = j.value("embedding_norm", false);
  c.linearBiases = j.value("linear_biases", true);
  c.normEps = j.value("norm_eps", 1e-5);
  if (j.contains("clip_qkv")) c.clipQkv = j.at("clip_qkv").get<double>();
  c.alibiSlopes = j.value("alibi_slopes", std::string("press"));
  c.alibiBiasMax = j.value("alibi_bias_max", 8.0);
  // Runs from before the block parts: xtrap's own blocks.
  c.norm = j.value("norm", std::string("layer"));
  c.blockNorms = j.value("block_norms", std::string("pre"));
  c.gatedMlp = j.value("gated_mlp", false);
  if (j.contains("fc1_bias")) c.fc1Bias = j.at("fc1_bias").get<bool>();
  c.tokenTypes = j.value("token_types", int64_t(0));
  c.positionOffset = j.value("position_offset", int64_t(0));
  if (j.contains("head_norm_eps")) c.headNormEps = j.at("head_norm_eps").get<double>();
  c.kvHeads = j.value("kv_heads", int64_t(0));
  c.headDim = j.value("head_dim", int64_t(0));
  if (j.contains("qkv_bias")) c.qkvBias = j.at("qkv_bias").get<bool>();
  c.qkNorm = j.value("qk_norm", false);
  c.attentionWindow = j.value("attention_window", int64_t(0));
  c.windowedLayers = j.value("windowed_layers", std::vector<int64_t>{});
  c.attentionSoftcap = j.value("attention_softcap", 0.0);
  c.finalSoftcap = j.value("final_softcap", 0.0);
  if (j.contains("query_scale")) c.queryScale = j.at("query_scale").get<double>();
  c.tiedHead = j.value("tied_head", true);
  c.embeddingScaleRounded = j.value("embedding_scale_rounded", false);
  c.rotaryFraction = j.value("rotary_fraction", 1.0);
  c.rotaryLocalBase = j.value("rotary_local_base", 0.0);
  if (j.contains("rope_scaling")) j.at("rope_scaling").get_to(c.ropeScaling);
  if (j.contains("alibi_interp")) {
    j.at("alibi_interp").at("interp").get_to(c.alibiInterp);
    j.at("alibi_interp").at("factor").get_to(c.alibiInterpFactor);
  }
}

}  // namespace xtrap
