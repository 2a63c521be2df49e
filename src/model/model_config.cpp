#include "model/model_config.h"

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
  static const std::vector<std::string> names{"gelu", "gelu-tanh", "relu"};
  return names;
}
const std::vector<std::string>& ModelConfig::alibiInitNames() {
  static const std::vector<std::string> names{"random", "standard"};
  return names;
}

OutputHeadKind ModelConfig::headKind() const {
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
  if (heads < 1 || dModel % heads != 0)
    fail("--heads (" + std::to_string(heads) + ") must divide --d-model (" + std::to_string(dModel) + ")");
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
  if (m == PositionMethod::Rotary && (dModel / heads) % 2 != 0) fail("rotary needs an even head dimension");
  if (isLinearBias(m)) makeLinearBiasSpec(m, heads, causal());  // throws its own reason
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
}

}  // namespace xtrap
