// bloom: transformers' configuration_bloom.py / modeling_bloom.py. LayerNorm on the word
// embeddings, pre-LN blocks, biases on every Linear and LayerNorm, tanh-approximated GELU, Press's
// slopes, final LayerNorm, the head tied unless tie_word_embeddings is false, no embedding scale.
// query_key_value's rows are per head [H, 3, D].
#include <fmt/format.h>

#include "run/families/families.h"
#include "run/families/megatron_block.h"

namespace xtrap {
namespace {

PretrainedConfig readBloom(const ConfigReader& r) {
  PretrainedConfig p = pretrainedDecoder("bloom", "alibi");
  ModelConfig& m = p.model;
  m.vocabSize = r.integer({"vocab_size"});
  m.dModel = r.integer({"hidden_size", "n_embed"});
  m.layers = r.integer({"n_layer", "num_hidden_layers"});
  m.heads = r.integer({"n_head", "num_attention_heads"});
  m.ffn = 4 * m.dModel;
  m.activation = "gelu-tanh";
  m.embeddingNorm = true;
  m.normEps = r.number({"layer_norm_epsilon"}, 1e-5);
  // BLOOM was trained at 2048 tokens (the paper; config.json has seq_length on some models).
  m.contextLength = r.integer("seq_length", 2048);
  m.tiedHead = r.flag("tie_word_embeddings", true);
  p.contextToken = r.tokenId("bos_token_id", 1);
  return p;
}

TensorMap bloomTensors(const ModelConfig& c) {
  TensorMap t;
  auto norm = [&](const std::string& ours, const std::string& theirs) {
    t[ours + ".weight"] = {{theirs + ".weight"}};
    t[ours + ".bias"] = {{theirs + ".bias"}};
  };
  t["token_embedding.weight"] = {{"word_embeddings.weight"}};
  norm("embedding_norm", "word_embeddings_layernorm");
  addMegatronBlocks(t, c, "h.", "self_attention");
  norm("ln_final", "ln_f");
  if (!c.tiedHead) t["head.weight"] = {{"lm_head.weight"}};
  return t;
}

}  // namespace

const PretrainedFamily& bloomFamily() {
  static const PretrainedFamily f{
      {"bloom"},
      {"vocab_size", "hidden_size", "n_embed", "n_layer", "num_hidden_layers", "n_head", "num_attention_heads",
       "layer_norm_epsilon", "seq_length", "tie_word_embeddings", "bos_token_id"},
      // pretraining_tp with slow_but_exact only sums the output projections in slices (Megatron's
      // tensor-parallel order); the rest is training or the hub's Megatron settings.
      {"pretraining_tp", "slow_but_exact", "hidden_dropout", "masked_softmax_fusion", "attention_softmax_in_fp32",
       "bias_dropout_fusion", "offset_alibi", "skip_bias_add", "skip_bias_add_qkv", "n_inner", "unk_token_id"},
      {{"apply_residual_connection_post_layernorm", false, "residuals taken after the LayerNorm"}},
      {"transformer."},
      readBloom,
      bloomTensors};
  return f;
}

}  // namespace xtrap
