// The pretrained families' config.json mapping (run/pretrained_family.h): every key the reference
// implementations read is computed, known not to change the numbers, or refused with one line
// naming it; computed keys land in the ModelConfig as the reference code uses them; and
// docs/pretrained.md's key lists are the code's.
#include <catch2/catch.hpp>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "run/pretrained_config.h"
#include "run/pretrained_family.h"

using nlohmann::json;
using namespace xtrap;

namespace {

// The keys each reference reads, copied from its source (not from xtrap):
//  - mpt: llm-foundry 8c8dd48 (2025-07-21) MPTConfig.__init__ and config_defaults.py's
//    attn_config/ffn_config defaults, modeling_mpt.py, layers/attention.py (kv_n_heads,
//    attn_temperature_tuning), layers/ffn.py (ffn_act_fn, ffn_hidden_size); transformers'
//    MptConfig / MptAttentionConfig (layer_norm_epsilon, verbose, prefix_lm, hidden_size aliases).
//  - the others: transformers' configuration_<family>.py (main at 008e574 for llama and qwen2; the
//    gemma3 class of 008f5c8; the rest as of transformers 4.5x) and BLOOM's hub config.json.
// BertConfig's keys (transformers' configuration_bert.py) and PretrainedConfig's that a BERT-layout
// forward reads, plus a family's own.
std::vector<std::string> bertConfigKeys(std::vector<std::string> more) {
  std::vector<std::string> keys{"vocab_size",
                                "hidden_size",
                                "num_hidden_layers",
                                "num_attention_heads",
                                "intermediate_size",
                                "hidden_act",
                                "hidden_dropout_prob",
                                "attention_probs_dropout_prob",
                                "max_position_embeddings",
                                "type_vocab_size",
                                "initializer_range",
                                "layer_norm_eps",
                                "pad_token_id",
                                "position_embedding_type",
                                "use_cache",
                                "classifier_dropout",
                                "is_decoder",
                                "add_cross_attention"};
  keys.insert(keys.end(), more.begin(), more.end());
  return keys;
}

const std::map<std::string, std::vector<std::string>>& referenceKeys() {
  static const std::map<std::string, std::vector<std::string>> keys{
      // transformers' configuration_gpt_neox.py (4.x): GPTNeoXConfig.__init__'s arguments.
      {"gpt_neox",
       {"vocab_size",
        "hidden_size",
        "num_hidden_layers",
        "num_attention_heads",
        "intermediate_size",
        "hidden_act",
        "rotary_pct",
        "rotary_emb_base",
        "attention_dropout",
        "hidden_dropout",
        "classifier_dropout",
        "max_position_embeddings",
        "initializer_range",
        "layer_norm_eps",
        "use_cache",
        "bos_token_id",
        "eos_token_id",
        "tie_word_embeddings",
        "use_parallel_residual",
        "rope_scaling",
        "attention_bias"}},
      {"mpt",
       {"d_model",
        "n_heads",
        "n_layers",
        "head_dim",
        "expansion_ratio",
        "max_seq_len",
        "vocab_size",
        "resid_pdrop",
        "emb_pdrop",
        "learned_pos_emb",
        "init_device",
        "logit_scale",
        "no_bias",
        "attention_bias",
        "embedding_fraction",
        "norm_type",
        "norm_eps",
        "use_cache",
        "init_config",
        "fc_type",
        "tie_word_embeddings",
        "use_pad_tok_in_ffn",
        "block_overrides",
        "final_logit_softcapping",
        "layer_norm_epsilon",
        "verbose",
        "initializer_range",
        "ffn_config.ffn_type",
        "ffn_config.ffn_act_fn",
        "ffn_config.ffn_hidden_size",
        "attn_config.attn_type",
        "attn_config.attn_pdrop",
        "attn_config.attn_impl",
        "attn_config.qk_ln",
        "attn_config.qk_gn",
        "attn_config.fused_qkv",
        "attn_config.clip_qkv",
        "attn_config.softmax_scale",
        "attn_config.attn_uses_sequence_id",
        "attn_config.sliding_window_size",
        "attn_config.attn_logit_softcapping",
        "attn_config.alibi",
        "attn_config.alibi_bias_max",
        "attn_config.rope",
        "attn_config.nope",
        "attn_config.rope_theta",
        "attn_config.rope_impl",
        "attn_config.rope_dail_config",
        "attn_config.rope_hf_config",
        "attn_config.attn_temperature_tuning",
        "attn_config.kv_dim",
        "attn_config.kv_n_heads",
        "attn_config.prefix_lm"}},
      {"bloom",
       {"vocab_size",
        "hidden_size",
        "n_layer",
        "n_head",
        "layer_norm_epsilon",
        "initializer_range",
        "use_cache",
        "bos_token_id",
        "eos_token_id",
        "apply_residual_connection_post_layernorm",
        "hidden_dropout",
        "attention_dropout",
        "pretraining_tp",
        "slow_but_exact",
        "n_embed",
        "seq_length",
        "masked_softmax_fusion",
        "offset_alibi",
        "skip_bias_add",
        "skip_bias_add_qkv",
        "attention_softmax_in_fp32",
        "bias_dropout_fusion",
        "n_inner",
        "unk_token_id",
        "pad_token_id",
        "tie_word_embeddings"}},
      {"llama",
       {"vocab_size",
        "hidden_size",
        "intermediate_size",
        "num_hidden_layers",
        "num_attention_heads",
        "num_key_value_heads",
        "hidden_act",
        "max_position_embeddings",
        "initializer_range",
        "rms_norm_eps",
        "use_cache",
        "pad_token_id",
        "bos_token_id",
        "eos_token_id",
        "pretraining_tp",
        "tie_word_embeddings",
        "rope_theta",
        "rope_scaling",
        "attention_bias",
        "attention_dropout",
        "mlp_bias",
        "head_dim"}},
      {"mistral",
       {"vocab_size",
        "hidden_size",
        "intermediate_size",
        "num_hidden_layers",
        "num_attention_heads",
        "num_key_value_heads",
        "head_dim",
        "hidden_act",
        "max_position_embeddings",
        "initializer_range",
        "rms_norm_eps",
        "use_cache",
        "pad_token_id",
        "bos_token_id",
        "eos_token_id",
        "tie_word_embeddings",
        "rope_theta",
        "rope_scaling",
        "sliding_window",
        "attention_dropout"}},
      {"qwen2", {"vocab_size",          "hidden_size",         "intermediate_size",  "num_hidden_layers",
                 "num_attention_heads", "num_key_value_heads", "hidden_act",         "max_position_embeddings",
                 "initializer_range",   "rms_norm_eps",        "use_cache",          "tie_word_embeddings",
                 "rope_theta",          "rope_scaling",        "use_sliding_window", "sliding_window",
                 "max_window_layers",   "layer_types",         "attention_dropout",  "pad_token_id",
                 "bos_token_id",        "eos_token_id"}},
      {"qwen3",
       {"vocab_size",
        "hidden_size",
        "intermediate_size",
        "num_hidden_layers",
        "num_attention_heads",
        "num_key_value_heads",
        "head_dim",
        "hidden_act",
        "max_position_embeddings",
        "initializer_range",
        "rms_norm_eps",
        "use_cache",
        "tie_word_embeddings",
        "rope_theta",
        "rope_scaling",
        "attention_bias",
        "use_sliding_window",
        "sliding_window",
        "max_window_layers",
        "layer_types",
        "attention_dropout"}},
      {"phi3",
       {"vocab_size",
        "hidden_size",
        "intermediate_size",
        "num_hidden_layers",
        "num_attention_heads",
        "num_key_value_heads",
        "resid_pdrop",
        "embd_pdrop",
        "attention_dropout",
        "hidden_act",
        "max_position_embeddings",
        "original_max_position_embeddings",
        "initializer_range",
        "rms_norm_eps",
        "use_cache",
        "tie_word_embeddings",
        "rope_theta",
        "rope_scaling",
        "partial_rotary_factor",
        "bos_token_id",
        "eos_token_id",
        "pad_token_id",
        "sliding_window"}},
      {"gemma",
       {"vocab_size",
        "hidden_size",
        "intermediate_size",
        "num_hidden_layers",
        "num_attention_heads",
        "num_key_value_heads",
        "head_dim",
        "hidden_act",
        "hidden_activation",
        "max_position_embeddings",
        "initializer_range",
        "rms_norm_eps",
        "use_cache",
        "pad_token_id",
        "eos_token_id",
        "bos_token_id",
        "tie_word_embeddings",
        "rope_theta",
        "attention_bias",
        "attention_dropout"}},
      {"gemma2",
       {"vocab_size",
        "hidden_size",
        "intermediate_size",
        "num_hidden_layers",
        "num_attention_heads",
        "num_key_value_heads",
        "head_dim",
        "hidden_activation",
        "max_position_embeddings",
        "initializer_range",
        "rms_norm_eps",
        "use_cache",
        "pad_token_id",
        "eos_token_id",
        "bos_token_id",
        "tie_word_embeddings",
        "rope_theta",
        "attention_bias",
        "attention_dropout",
        "query_pre_attn_scalar",
        "sliding_window",
        "final_logit_softcapping",
        "attn_logit_softcapping",
        "cache_implementation",
        "layer_types"}},
      {"gemma3_text",
       {"vocab_size",
        "hidden_size",
        "intermediate_size",
        "num_hidden_layers",
        "num_attention_heads",
        "num_key_value_heads",
        "head_dim",
        "hidden_activation",
        "max_position_embeddings",
        "initializer_range",
        "rms_norm_eps",
        "use_cache",
        "pad_token_id",
        "eos_token_id",
        "bos_token_id",
        "tie_word_embeddings",
        "rope_theta",
        "attention_bias",
        "attention_dropout",
        "query_pre_attn_scalar",
        "sliding_window",
        "final_logit_softcapping",
        "attn_logit_softcapping",
        "cache_implementation",
        "rope_scaling",
        "rope_local_base_freq",
        "sliding_window_pattern",
        "layer_types"}},
      // transformers' configuration_bert.py (BertConfig) and what each family adds: MosaicBERT's
      // configuration_bert.py, JinaBERT's JinaBertConfig, RobertaConfig's bos/eos.
      {"mosaicbert", bertConfigKeys({"alibi_starting_size"})},
      {"jinabert", bertConfigKeys({"feed_forward_type", "emb_pooler", "attn_implementation"})},
      {"bert", bertConfigKeys({})},
      {"roberta", bertConfigKeys({"bos_token_id", "eos_token_id"})},
  };
  return keys;
}

// The name a family is found by (PretrainedConfig::modelType).
std::string familyKey(const PretrainedFamily& f) { return f.name.empty() ? f.modelTypes[0] : f.name; }

// A small valid config of each family.
json minimal(const std::string& type) {
  if (type == "mosaicbert" || type == "jinabert" || type == "bert" || type == "roberta") {
    json j = {{"model_type", type == "roberta" ? "roberta" : "bert"},
              {"vocab_size", 64},
              {"hidden_size", 16},
              {"num_hidden_layers", 2},
              {"num_attention_heads", 4},
              {"intermediate_size", 24}};
    if (type == "mosaicbert") j["alibi_starting_size"] = 32;
    if (type == "jinabert") j["position_embedding_type"] = "alibi", j["feed_forward_type"] = "geglu";
    return j;
  }
  if (type == "bloom")
    return {{"model_type", "bloom"}, {"vocab_size", 64}, {"hidden_size", 16}, {"n_layer", 2}, {"n_head", 4}};
  if (type == "mpt")
    return {{"model_type", "mpt"},
            {"vocab_size", 64},
            {"d_model", 16},
            {"n_layers", 2},
            {"n_heads", 4},
            {"max_seq_len", 32},
            {"attn_config", {{"alibi", true}}}};
  if (type == "gpt_neox")
    return {{"model_type", "gpt_neox"},
            {"vocab_size", 64},
            {"hidden_size", 32},
            {"num_hidden_layers", 2},
            {"num_attention_heads", 4},
            {"intermediate_size", 48},
            {"max_position_embeddings", 64},
            {"use_parallel_residual", false}};
  return {{"model_type", type},       {"vocab_size", 64},       {"hidden_size", 32},
          {"intermediate_size", 48},  {"num_hidden_layers", 6}, {"num_attention_heads", 4},
          {"num_key_value_heads", 2}, {"head_dim", 8},          {"max_position_embeddings", 128}};
}

ModelConfig parse(const json& j) { return parsePretrainedConfig(j, "dir/config.json").model; }

std::string errorOf(const json& j) {
  try {
    parse(j);
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}

void set(json& j, const std::string& key, const json& value) {
  json* at = &j;
  for (size_t start = 0, dot; (dot = key.find('.', start)) != std::string::npos; start = dot + 1)
    at = &(*at)[key.substr(start, dot - start)];
  (*at)[key.substr(key.rfind('.') == std::string::npos ? 0 : key.rfind('.') + 1)] = value;
}

// A value other than `accepted`, of its type where it has one.
json other(const json& accepted) {
  if (accepted.is_boolean()) return !accepted.get<bool>();
  if (accepted.is_null()) return 2.5;
  return "other";
}

}  // namespace

TEST_CASE("every key the reference implementations read is computed, inert or refused") {
  for (const auto& [type, keys] : referenceKeys()) {
    const PretrainedFamily* f = findPretrainedFamily(type);
    REQUIRE(f);
    std::set<std::string> known(commonInertKeys().begin(), commonInertKeys().end());
    known.insert(f->computed.begin(), f->computed.end());
    known.insert(f->inert.begin(), f->inert.end());
    for (const auto& k : f->refused) known.insert(k.key);
    for (const auto& key : keys) {
      INFO(type << ": " << key);
      CHECK(known.count(key) == 1);
    }
  }
}

TEST_CASE("every refused key, set to another value, is one line naming it and the file") {
  for (const auto* f : pretrainedFamilies()) {
    std::vector<RefusedKey> refused = f->refused;
    refused.insert(refused.end(), commonRefusedKeys().begin(), commonRefusedKeys().end());
    REQUIRE(parse(minimal(familyKey(*f))).layers >= 1);
    for (const auto& k : refused) {
      json j = minimal(familyKey(*f));
      set(j, k.key, other(k.accepted));
      std::string err = errorOf(j);
      INFO(familyKey(*f) << ": " << k.key << " -> " << err);
      CHECK(err.find(k.key) != std::string::npos);
      CHECK(err.find("dir/config.json") == 0);
      CHECK(err.find('\n') == std::string::npos);
      set(j, k.key, k.accepted);
      CHECK(errorOf(j).empty());
    }
  }
}

TEST_CASE("gpt_neox: GPTNeoXConfig's own names and defaults, the parallel residual refused") {
  json j = minimal("gpt_neox");
  ModelConfig m = parse(j);
  // transformers' defaults: rotary_pct 0.25 (2 of a head's 8 channels), base 10000, untied, gelu.
  CHECK(m.pos == "rotary");
  CHECK(m.rotaryDim() == 2);
  CHECK(m.rotaryBase == 10000.0);
  CHECK(!m.tiedHead);
  CHECK(m.activation == "gelu");
  CHECK(m.norm == "layer");
  CHECK(m.linearBiases);
  CHECK(m.contextLength == 64);
  j["rotary_pct"] = 0.5;
  j["rotary_emb_base"] = 500.0;
  j["hidden_act"] = "gelu_new";
  m = parse(j);
  CHECK(m.rotaryDim() == 4);
  CHECK(m.rotaryBase == 500.0);
  CHECK(m.activation == "gelu-tanh");
  j["partial_rotary_factor"] = 1.0;  // the standard names win (transformers 5.x)
  j["rope_theta"] = 20000.0;
  m = parse(j);
  CHECK(m.rotaryDim() == 8);
  CHECK(m.rotaryBase == 20000.0);
  j.erase("use_parallel_residual");  // absent: GPTNeoXConfig's default, true
  std::string err = errorOf(j);
  CHECK(err.find("dir/config.json") == 0);
  CHECK(err.find("use_parallel_residual") != std::string::npos);
}

TEST_CASE("MPT keys that change the numbers are computed") {
  json j = minimal("mpt");
  j["tie_word_embeddings"] = false;
  j["norm_eps"] = 1e-3;
  j["final_logit_softcapping"] = 30.0;
  j["attn_config"]["sliding_window_size"] = 5;
  j["attn_config"]["attn_logit_softcapping"] = 50.0;
  ModelConfig m = parse(j);
  CHECK(!m.tiedHead);
  CHECK(m.normEps == 1e-3);
  CHECK(m.finalSoftcap == 30.0);
  CHECK(m.attentionSoftcap == 50.0);
  CHECK(m.attentionWindow == 6);  // keys i - 5 .. i (llm-foundry's triu(-5)): six keys
  CHECK(m.windowedLayers.empty());
  j["attn_config"]["attn_temperature_tuning"] = {{"floor_scale", 8192}, {"attn_scale", 0.0}};
  CHECK(errorOf(j).empty());
  j["attn_config"]["attn_temperature_tuning"]["attn_scale"] = 0.1;
  CHECK(errorOf(j).find("attn_temperature_tuning") != std::string::npos);
  // GQA: kv_n_heads must divide n_heads
  json g = minimal("mpt");
  g["attn_config"]["attn_type"] = "grouped_query_attention";
  g["attn_config"]["kv_n_heads"] = 3;
  CHECK(errorOf(g).find("kv_n_heads") != std::string::npos);
  g["attn_config"]["kv_n_heads"] = 2;
  CHECK(parse(g).kvHeads == 2);
  // an attn_config key xtrap does not know
  json u = minimal("mpt");
  u["attn_config"]["reuse_kv_layer_idx"] = -1;
  CHECK(errorOf(u).find("attn_config.reuse_kv_layer_idx") != std::string::npos);
}

TEST_CASE("rotary families: windows, scales, biases and norms as the reference modeling code uses them") {
  json q = minimal("qwen2");
  q["use_sliding_window"] = true;
  q["sliding_window"] = 16;
  q["max_window_layers"] = 4;
  ModelConfig m = parse(q);
  CHECK(m.attentionWindow == 16);
  CHECK(m.windowedLayers == std::vector<int64_t>{4, 5});
  CHECK(m.qkvBias == true);
  CHECK(!m.linearBiases);
  q["use_sliding_window"] = false;
  CHECK(parse(q).attentionWindow == 0);
  q["layer_types"] = {"full_attention", "sliding_attention"};
  CHECK(errorOf(q).find("layer_types") != std::string::npos);

  ModelConfig g2 = parse(minimal("gemma2"));
  CHECK(g2.windowedLayers == std::vector<int64_t>{0, 2, 4});
  CHECK(g2.attentionSoftcap == 50.0);
  CHECK(g2.finalSoftcap == 30.0);
  CHECK(g2.queryScale == Approx(1.0 / 16.0));
  CHECK(g2.blockNorms == "sandwich");
  CHECK(g2.norm == "rms-one-plus");
  json g2null = minimal("gemma2");
  g2null["final_logit_softcapping"] = nullptr;
  CHECK(parse(g2null).finalSoftcap == 0.0);

  json g3 = minimal("gemma3_text");
  g3["sliding_window_pattern"] = 3;
  g3["sliding_window"] = 8;
  ModelConfig m3 = parse(g3);
  CHECK(m3.windowedLayers == std::vector<int64_t>{0, 1, 3, 4});
  CHECK(m3.qkNorm);
  CHECK(m3.rotaryLocalBase == 10000.0);
  CHECK(m3.rotaryBase == 1e6);
  CHECK(m3.attentionSoftcap == 0.0);
  CHECK(m3.tiedHead);

  json l = minimal("llama");
  l["attention_bias"] = true;
  CHECK(errorOf(l).find("mlp_bias") != std::string::npos);
  l["mlp_bias"] = true;
  CHECK(parse(l).linearBiases);
  l["num_key_value_heads"] = 3;
  CHECK(errorOf(l).find("num_key_value_heads") != std::string::npos);
  json act = minimal("llama");
  act["hidden_act"] = "gelu_10";
  CHECK(errorOf(act).find("hidden_act") != std::string::npos);
  // A key this family does not read but another computes: refused; a key no family knows: ignored.
  json other = minimal("llama");
  other["sliding_window"] = 4096;
  CHECK(errorOf(other).find("sliding_window") != std::string::npos);
  other.erase("sliding_window");
  other["rope_interleaved"] = false;
  CHECK(errorOf(other).empty());
  json phi = minimal("phi3");
  phi["partial_rotary_factor"] = 0.5;
  phi["original_max_position_embeddings"] = 64;
  CHECK(parse(phi).rotaryFraction == 0.5);
  CHECK(parse(phi).contextLength == 64);
}

TEST_CASE("BERT-layout encoders: the family from the config or the tensors, the head from the tensors") {
  auto read = [](const json& j, std::set<std::string> tensors = {}) {
    return parsePretrainedConfig(j, "dir/config.json", tensors);
  };
  PretrainedConfig mosaic = read(minimal("mosaicbert"));
  CHECK(mosaic.modelType == "mosaicbert");
  CHECK(mosaic.model.arch == "encoder");
  CHECK(mosaic.model.pos == "alibi");
  CHECK(mosaic.model.blockNorms == "post");
  CHECK(mosaic.model.gatedMlp);
  CHECK(!mosaic.model.resolvedFc1Bias());
  CHECK(mosaic.model.headNormEps == 1e-12);
  CHECK(mosaic.model.contextLength == 32);  // alibi_starting_size
  CHECK(mosaic.model.head == "roberta");
  json plain = minimal("bert");
  CHECK(read(plain).modelType == "bert");
  CHECK(read(plain).model.pos == "learned");
  // A MosaicBERT saved without alibi_starting_size: its fused Wqkv says what it is.
  CHECK(read(plain, {"bert.encoder.layer.0.attention.self.Wqkv.weight"}).modelType == "mosaicbert");
  PretrainedConfig jina = read(minimal("jinabert"), {"embeddings.word_embeddings.weight"});
  CHECK(jina.modelType == "jinabert");
  CHECK(jina.model.head == "none");  // no cls.predictions: saved without its masked-LM head
  CHECK(read(minimal("jinabert"), {"cls.predictions.transform.dense.weight"}).model.head == "roberta");
  json reglu = minimal("jinabert");
  reglu["feed_forward_type"] = "reglu";
  CHECK(read(reglu).model.activation == "relu");
  PretrainedConfig roberta = read(minimal("roberta"));
  CHECK(roberta.model.positionOffset == 2);  // pad_token_id 1 + 1
  CHECK(roberta.model.contextLength == 512);
  CHECK(roberta.model.tokenTypes == 1);
  json act = minimal("bert");
  act["hidden_act"] = "gelu_new";
  CHECK(errorOf(act).find("hidden_act") != std::string::npos);
}

TEST_CASE("docs/pretrained.md lists the code's families and keys") {
  std::ifstream in("docs/pretrained.md");
  REQUIRE(in);
  std::stringstream text;
  text << in.rdbuf();
  std::string doc = text.str(), begin = "<!-- keys:begin -->\n", end = "<!-- keys:end -->";
  size_t a = doc.find(begin), b = doc.find(end);
  REQUIRE(a != std::string::npos);
  REQUIRE(b != std::string::npos);
  std::string want = pretrainedKeysMarkdown();
  if (std::getenv("XTRAP_WRITE_DOCS")) {  // regenerate: XTRAP_WRITE_DOCS=1 tests_base "docs/pretrained.md*"
    std::ofstream("docs/pretrained.md") << doc.substr(0, a + begin.size()) << want << doc.substr(b);
    return;
  }
  CHECK(doc.substr(a + begin.size(), b - a - begin.size()) == want);
}

TEST_CASE("the context token: bos_token_id 0 (SmolLM2), else the first of an eos_token_id list (Llama 3)") {
  auto context = [](const json& j) { return parsePretrainedConfig(j, "dir/config.json").contextToken; };
  json l = minimal("llama");
  l["bos_token_id"] = 0;
  l["eos_token_id"] = 0;
  CHECK(context(l) == 0);
  l.erase("bos_token_id");
  l["eos_token_id"] = {7, 9};
  CHECK(context(l) == 7);
  l["eos_token_id"] = -1;
  CHECK(errorOf(l).find("eos_token_id must be a token id") != std::string::npos);
  l["eos_token_id"] = 3;
  l["bos_token_id"] = 1 << 20;  // beyond vocab_size
  CHECK(errorOf(l).find("context token") != std::string::npos);
}
