// gpt_neox: transformers' configuration_gpt_neox.py / modeling_gpt_neox.py with
// use_parallel_residual false, the sequential pre-LayerNorm block x = x + attn(ln1(x)); x = x +
// mlp(ln2(x)) (Pythia's parallel form is refused). LayerNorms and every Linear with biases, GELU
// (hidden_act), rotary positions on the first rotary_pct of each head's channels (rotate-half),
// rope_scaling, the head untied unless tie_word_embeddings. query_key_value's rows are per head
// [H, 3, D], as BLOOM's. This is the model type `xtrap export --hf` writes for xtrap's own rotary
// decoders (their blocks are exactly this), so the family also writes its config.json.
#include <fmt/format.h>

#include "run/families/families.h"
#include "run/families/megatron_block.h"
#include "run/rope_config.h"

namespace xtrap {
namespace {

std::string activation(const ConfigReader& r) {
  std::string name = r.text("hidden_act", "gelu");
  if (name == "gelu" || name == "relu") return name;
  if (name == "gelu_new" || name == "gelu_pytorch_tanh" || name == "gelu_fast") return "gelu-tanh";
  if (name == "silu" || name == "swish") return "silu";
  r.fail("hidden_act '" + name + "' is not supported (gelu, gelu_new, gelu_pytorch_tanh, gelu_fast, relu, silu)");
}

PretrainedConfig readGptNeox(const ConfigReader& r) {
  PretrainedConfig p = pretrainedDecoder("gpt_neox", "rotary");
  ModelConfig& m = p.model;
  m.vocabSize = r.integer({"vocab_size"});
  m.dModel = r.integer({"hidden_size"});
  m.layers = r.integer({"num_hidden_layers"});
  m.heads = r.integer({"num_attention_heads"});
  if (m.dModel % m.heads != 0)
    r.fail(fmt::format("num_attention_heads ({}) must divide hidden_size ({})", m.heads, m.dModel));
  m.ffn = r.integer({"intermediate_size"});
  m.activation = activation(r);
  m.normEps = r.number({"layer_norm_eps"}, 1e-5);
  if (!(m.normEps > 0)) r.fail("layer_norm_eps must be positive");
  if (r.flag("use_parallel_residual", true))
    r.fail("use_parallel_residual true (attention and MLP side by side, Pythia's) is not supported");
  // GPTNeoXConfig's names (rotary_pct, rotary_emb_base) read as transformers reads them: the
  // standard names where given, else these, else its defaults 0.25 and 10000.
  nlohmann::json rope = r.json();
  if (!rope.contains("partial_rotary_factor") || rope["partial_rotary_factor"].is_null())
    rope["partial_rotary_factor"] = r.number({"rotary_pct"}, 0.25);
  if (!rope.contains("rope_theta") || rope["rope_theta"].is_null())
    rope["rope_theta"] = r.number({"rotary_emb_base"}, 10000.0);
  RopeConfig rc = readRopeConfig(rope, r.file(), m.dModel / m.heads);
  m.rotaryBase = rc.base;
  m.rotaryFraction = rc.rotaryFraction;
  m.ropeScaling = rc.scaling;
  m.contextLength = r.integer({"max_position_embeddings"});
  m.tiedHead = r.flag("tie_word_embeddings", false);
  p.contextToken = r.tokenId("bos_token_id", r.tokenId("eos_token_id", 0));
  return p;
}

TensorMap gptNeoxTensors(const ModelConfig& c) {
  TensorMap t;
  t["token_embedding.weight"] = {{"embed_in.weight"}};
  addMegatronBlocks(t, c, "layers.", "attention");
  t["ln_final.weight"] = {{"final_layer_norm.weight"}};
  t["ln_final.bias"] = {{"final_layer_norm.bias"}};
  // The head lives outside the gpt_neox. prefix (GPTNeoXForCausalLM.embed_out).
  if (!c.tiedHead) t["head.weight"] = {{"embed_out.weight"}};
  return t;
}

// What GPTNeoXForCausalLM cannot compute of an xtrap decoder, with the training flag that avoids it.
std::string gptNeoxRefusal(const ModelConfig& m) {
  if (m.position() != PositionMethod::Rotary) return "gpt_neox computes rotary positions, not " + m.pos;
  if (m.activation == "silu") return "gpt_neox's MLP is not gated: --activation silu has no equivalent";
  if (!m.finalNorm) return "gpt_neox has a final LayerNorm: train without --no-final-norm";
  return "";
}

std::string hiddenAct(const std::string& activation) {
  if (activation == "gelu-tanh") return "gelu_pytorch_tanh";
  return activation;  // gelu (exact), relu
}

nlohmann::json writeGptNeox(const ModelConfig& m, int32_t eosId) {
  nlohmann::json j;
  j["architectures"] = {"GPTNeoXForCausalLM"};
  j["model_type"] = "gpt_neox";
  j["vocab_size"] = m.vocabSize;
  j["hidden_size"] = m.dModel;
  j["num_hidden_layers"] = m.layers;
  j["num_attention_heads"] = m.heads;
  j["intermediate_size"] = m.ffn;
  j["hidden_act"] = hiddenAct(m.activation);
  j["layer_norm_eps"] = m.normEps;
  j["use_parallel_residual"] = false;
  j["attention_bias"] = true;
  // Both spellings: GPTNeoXConfig's own (transformers 4.x) and the standard ones 5.x reads.
  j["rotary_pct"] = m.rotaryFraction;
  j["partial_rotary_factor"] = m.rotaryFraction;
  j["rotary_emb_base"] = m.rotaryBase;
  j["rope_theta"] = m.rotaryBase;
  j["rope_scaling"] = m.ropeScaling.isDefault() ? nlohmann::json() : ropeScalingJson(m.ropeScaling);
  j["max_position_embeddings"] = m.contextLength;
  j["tie_word_embeddings"] = m.tiedHead;
  j["bos_token_id"] = eosId;
  j["eos_token_id"] = eosId;
  j["torch_dtype"] = "float32";
  return j;
}

}  // namespace

const PretrainedFamily& gptNeoxFamily() {
  static const PretrainedFamily f = [] {
    PretrainedFamily g{{"gpt_neox"},
                       {"vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size",
                        "hidden_act", "layer_norm_eps", "use_parallel_residual", "rotary_pct", "partial_rotary_factor",
                        "rotary_emb_base", "rope_theta", "rope_scaling", "rope_parameters", "max_position_embeddings",
                        "tie_word_embeddings", "bos_token_id", "eos_token_id"},
                       {"hidden_dropout", "classifier_dropout", "use_cache"},
                       {{"attention_bias", true, "attention without biases beside an MLP with them"}},
                       {"gpt_neox."},
                       readGptNeox,
                       gptNeoxTensors};
    g.exporter = {gptNeoxRefusal, writeGptNeox, "gpt_neox.", {"embed_out.weight"}};
    return g;
  }();
  return f;
}

}  // namespace xtrap
