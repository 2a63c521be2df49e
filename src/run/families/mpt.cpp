// mpt: llm-foundry's configuration_mpt.py, modeling_mpt.py and layers/attention.py (transformers'
// port reads a subset of the same keys). LayerNorms without bias unless no_bias is false, exact
// GELU, clip_qkv, ALiBi slopes 2^(-h * alibi_bias_max / n') (llm-foundry's; the transformers port
// always uses 8), softmax_scale (default 1/sqrt(d_model / n_heads), also with head_dim set),
// soft-caps (attention: on q.k before the ALiBi bias), sliding_window_size s (keys i - s .. i),
// grouped-query attention, untied lm_head, MPTGLU. max_seq_len is the training length, not a limit.
#include <fmt/format.h>

#include <cmath>

#include "run/families/families.h"

namespace xtrap {
namespace {

std::string ffnActivation(const ConfigReader& f) {
  if (!f.has("ffn_act_fn")) return "gelu";  // llm-foundry's default: gelu, approximate none
  ConfigReader act = f.object("ffn_act_fn");
  std::string name = act.text("name", "?"), approx = act.text("approximate", "none");
  if (name == "gelu" && approx == "none") return "gelu";
  if (name == "gelu" && approx == "tanh") return "gelu-tanh";
  if ((name == "silu" || name == "relu") && !act.has("approximate")) return name;
  f.fail("ffn_config.ffn_act_fn " + act.json().dump() + " is not supported (gelu, gelu tanh, silu, relu)");
}

PretrainedConfig readMpt(const ConfigReader& r) {
  PretrainedConfig p = pretrainedDecoder("mpt", "alibi");
  ModelConfig& m = p.model;
  m.alibiSlopes = "mpt";
  m.vocabSize = r.integer({"vocab_size"});
  m.dModel = r.integer({"d_model", "hidden_size"});
  m.layers = r.integer({"n_layers", "num_hidden_layers"});
  m.heads = r.integer({"n_heads", "num_attention_heads"});
  if (m.dModel % m.heads != 0) r.fail(fmt::format("n_heads ({}) must divide d_model ({})", m.heads, m.dModel));
  m.headDim = r.integer("head_dim", m.dModel / m.heads);
  m.linearBiases = !r.flag("no_bias", false);  // llm-foundry's default (the transformers port's is true)
  m.qkvBias = r.flag("attention_bias", m.linearBiases);
  // llm-foundry's name is norm_eps; the transformers port's layer_norm_epsilon.
  m.normEps = r.number({"norm_eps", "layer_norm_epsilon"}, 1e-5);
  if (r.has("norm_eps") && r.has("layer_norm_epsilon") && r.number({"layer_norm_epsilon"}, 0) != m.normEps)
    r.fail("norm_eps and layer_norm_epsilon disagree");
  m.contextLength = r.integer({"max_seq_len"});
  m.tiedHead = r.flag("tie_word_embeddings", true);
  m.finalSoftcap = r.number({"final_logit_softcapping"}, 0.0);
  if (m.finalSoftcap < 0) r.fail("final_logit_softcapping must be positive or null");
  std::string norm = r.text("norm_type", "low_precision_layernorm");
  if (norm != "layernorm" && norm != "low_precision_layernorm")
    r.fail("norm_type '" + norm + "' is not supported (layernorm, low_precision_layernorm)");

  ConfigReader f = r.object("ffn_config");
  std::string ffnType = f.text("ffn_type", "mptmlp");
  if (ffnType != "mptmlp" && ffnType != "mptglu")
    r.fail("ffn_config.ffn_type '" + ffnType + "' is not supported (mptmlp, mptglu)");
  m.gatedMlp = ffnType == "mptglu";
  m.activation = ffnActivation(f);
  double ratio = r.number({"expansion_ratio"}, 4.0);
  double width = ratio * double(m.dModel);
  if (!f.has("ffn_hidden_size") && !(width >= 1 && width < 2147483648.0 && width == std::floor(width)))
    r.fail("d_model * expansion_ratio must be a positive integer below 2^31");
  m.ffn = f.has("ffn_hidden_size") ? f.integer({"ffn_hidden_size"}) : int64_t(width);

  ConfigReader a = r.object("attn_config");
  if (!a.flag("alibi", false)) r.fail("attn_config.alibi false is not supported (xtrap reads ALiBi models)");
  m.alibiBiasMax = a.number({"alibi_bias_max"}, 8.0);
  std::string type = a.text("attn_type", "multihead_attention");
  if (type == "grouped_query_attention")
    m.kvHeads = a.integer({"kv_n_heads"});
  else if (type == "multiquery_attention")
    m.kvHeads = 1;
  else if (type != "multihead_attention")
    r.fail("attn_config.attn_type '" + type + "' is not supported");
  if (m.kvHeads > 0 && m.heads % m.kvHeads != 0)
    r.fail(fmt::format("attn_config.kv_n_heads ({}) must divide n_heads ({})", m.kvHeads, m.heads));
  if (a.has("softmax_scale")) {
    double s = a.number({"softmax_scale"}, 0.0);
    if (!(s > 0)) r.fail("attn_config.softmax_scale must be positive");
    m.queryScale = s;
  } else if (m.headDim * m.heads != m.dModel) {
    m.queryScale = 1.0 / std::sqrt(double(m.dModel) / double(m.heads));
  }
  if (a.has("clip_qkv")) {
    m.clipQkv = a.number({"clip_qkv"}, 0.0);
    if (!(*m.clipQkv > 0)) r.fail("attn_config.clip_qkv must be a positive number");
  }
  if (const auto* w = a.find({"sliding_window_size"})) {
    if (!w->is_number_integer() || w->get<int64_t>() < -1 || w->get<int64_t>() >= (int64_t(1) << 31))
      r.fail("attn_config.sliding_window_size must be -1 or a non-negative integer below 2^31");
    // llm-foundry keeps keys j with i - s <= j <= i: s + 1 keys, xtrap's window of s + 1.
    if (w->get<int64_t>() >= 0) m.attentionWindow = w->get<int64_t>() + 1;
  }
  m.attentionSoftcap = a.number({"attn_logit_softcapping"}, 0.0);
  if (m.attentionSoftcap < 0) r.fail("attn_config.attn_logit_softcapping must be positive or null");
  if (a.has("attn_temperature_tuning")) {
    ConfigReader t = a.object("attn_temperature_tuning");
    if (t.number({"attn_scale"}, 0.0) != 0.0)
      r.fail("attn_config.attn_temperature_tuning with attn_scale other than 0 is not supported");
  }
  p.contextToken = r.tokenId("bos_token_id", r.tokenId("eos_token_id", 0));
  return p;
}

TensorMap mptTensors(const ModelConfig& c) {
  TensorMap t;
  // LayerNorms carry a bias only when no_bias is false; otherwise xtrap's stays zero.
  auto norm = [&](const std::string& ours, const std::string& theirs) {
    t[ours + ".weight"] = {{theirs + ".weight"}};
    t[ours + ".bias"] = c.linearBiases ? TensorSource{{theirs + ".bias"}} : TensorSource{};
  };
  auto linear = [&](const std::string& ours, std::vector<std::string> theirs, bool bias) {
    std::vector<std::string> weights, biases;
    for (const auto& n : theirs) weights.push_back(n + ".weight"), biases.push_back(n + ".bias");
    std::vector<int64_t> rows(theirs.size() > 1 ? theirs.size() : 0, c.ffn);  // MPTGLU's gate | up
    t[ours + ".weight"] = {weights, TensorLayout::AsStored, rows};
    if (bias) t[ours + ".bias"] = {biases, TensorLayout::AsStored, rows};
  };
  t["token_embedding.weight"] = {{"wte.weight"}};
  for (int64_t l = 0; l < c.layers; ++l) {
    std::string b = fmt::format("blocks.{}.", l), h = fmt::format("blocks.{}.", l);
    norm(b + "ln1", h + "norm_1");
    linear(b + "attn.qkv", {h + "attn.Wqkv"}, c.resolvedQkvBias());
    linear(b + "attn.out", {h + "attn.out_proj"}, c.linearBiases);
    norm(b + "ln2", h + "norm_2");
    if (c.gatedMlp)
      linear(b + "fc1", {h + "ffn.gate_proj", h + "ffn.up_proj"}, c.linearBiases);
    else
      linear(b + "fc1", {h + "ffn.up_proj"}, c.linearBiases);
    linear(b + "fc2", {h + "ffn.down_proj"}, c.linearBiases);
  }
  norm("ln_final", "norm_f");
  if (!c.tiedHead) t["head.weight"] = {{"lm_head.weight"}};
  return t;
}

// What llm-foundry's MPT cannot compute of an xtrap decoder, with the training flag that avoids it.
std::string mptRefusal(const ModelConfig& m) {
  if (m.position() != PositionMethod::Alibi) return "mpt computes ALiBi with fixed slopes, not " + m.pos;
  if (m.alibiInterp != "none")
    return "mpt's slopes are 2^(-8h/H): an adapted run's " + m.alibiInterp +
           "-interpolated slopes have no setting (adapt with --interp none)";
  if (!m.finalNorm) return "mpt has a final LayerNorm: train without --no-final-norm";
  return "";
}

nlohmann::json writeMpt(const ModelConfig& m, int32_t eosId) {
  nlohmann::json act{{"name", m.activation == "gelu-tanh" ? std::string("gelu") : m.activation}};
  if (m.activation == "gelu" || m.activation == "gelu-tanh")
    act["approximate"] = m.activation == "gelu" ? "none" : "tanh";
  nlohmann::json j;
  j["architectures"] = {"MPTForCausalLM"};
  j["model_type"] = "mpt";
  j["vocab_size"] = m.vocabSize;
  j["d_model"] = m.dModel;
  j["n_layers"] = m.layers;
  j["n_heads"] = m.heads;
  j["max_seq_len"] = m.contextLength;
  j["no_bias"] = !m.linearBiases;
  j["norm_type"] = "layernorm";
  j["norm_eps"] = m.normEps;
  j["layer_norm_epsilon"] = m.normEps;
  j["tie_word_embeddings"] = m.tiedHead;
  j["expansion_ratio"] = double(m.ffn) / double(m.dModel);
  j["ffn_config"] = {{"ffn_type", "mptmlp"}, {"ffn_hidden_size", m.ffn}, {"ffn_act_fn", act}};
  j["attn_config"] = {{"alibi", true},
                      {"alibi_bias_max", m.alibiSlopes == "mpt" ? m.alibiBiasMax : 8.0},
                      {"attn_type", "multihead_attention"},
                      {"attn_impl", "torch"}};
  j["bos_token_id"] = eosId;
  j["eos_token_id"] = eosId;
  j["torch_dtype"] = "float32";
  return j;
}

}  // namespace

const PretrainedFamily& mptFamily() {
  static const PretrainedFamily f = [] {
    PretrainedFamily g{{"mpt"},
                       {"vocab_size",
                        "d_model",
                        "hidden_size",
                        "n_layers",
                        "num_hidden_layers",
                        "n_heads",
                        "num_attention_heads",
                        "head_dim",
                        "no_bias",
                        "attention_bias",
                        "norm_eps",
                        "layer_norm_epsilon",
                        "max_seq_len",
                        "tie_word_embeddings",
                        "final_logit_softcapping",
                        "norm_type",
                        "expansion_ratio",
                        "ffn_config",
                        "ffn_config.ffn_type",
                        "ffn_config.ffn_act_fn",
                        "ffn_config.ffn_act_fn.name",
                        "ffn_config.ffn_act_fn.approximate",
                        "ffn_config.ffn_hidden_size",
                        "attn_config",
                        "attn_config.alibi",
                        "attn_config.alibi_bias_max",
                        "attn_config.attn_type",
                        "attn_config.kv_n_heads",
                        "attn_config.softmax_scale",
                        "attn_config.clip_qkv",
                        "attn_config.sliding_window_size",
                        "attn_config.attn_logit_softcapping",
                        "attn_config.attn_temperature_tuning",
                        "attn_config.attn_temperature_tuning.attn_scale",
                        "bos_token_id",
                        "eos_token_id"},
                       // Training-only (dropout, initialisation, gradient scaling, padding, sequence ids), the
                       // implementation of the same product (attn_impl, fc_type), settings read only with rope,
                       // which is refused, and the verbose/init_device switches.
                       {"resid_pdrop", "emb_pdrop", "attn_config.attn_pdrop", "embedding_fraction", "init_device",
                        "init_config", "fc_type", "use_pad_tok_in_ffn", "verbose", "learned_pos_emb",
                        "attn_config.attn_impl", "attn_config.attn_uses_sequence_id", "attn_config.kv_dim",
                        "attn_config.rope_theta", "attn_config.rope_impl", "attn_config.rope_dail_config",
                        "attn_config.rope_hf_config", "attn_config.attn_temperature_tuning.floor_scale"},
                       {{"logit_scale", nullptr, "logits scaled"},
                        {"block_overrides", nullptr, "per-layer attention settings"},
                        {"attn_config.rope", false, "rotary positions beside ALiBi"},
                        {"attn_config.nope", false, "layers without positions"},
                        {"attn_config.qk_ln", false, "a LayerNorm over all of q and of k"},
                        {"attn_config.qk_gn", false, "a per-head norm on q and k"},
                        {"attn_config.prefix_lm", false, "bidirectional prefixes"},
                        {"attn_config.fused_qkv", true, "separate Wq, Wk, Wv"}},
                       {"transformer."},
                       readMpt,
                       mptTensors};
    g.exporter = {mptRefusal, writeMpt, "transformer.", {"lm_head.weight"}};
    return g;
  }();
  return f;
}

}  // namespace xtrap
