// The BERT-layout encoders (model_type bert and roberta): post-LN blocks, a LayerNorm over the sum of
// the word, token-type (type 0) and position embeddings, exact GELU, and the masked-LM head
// (dense, GELU, LayerNorm, the decoder tied to the word embeddings plus its own bias), softmax
// over every row of the embedding (padding rows included, as the reference code does).
//  - mosaicbert: mosaicml/examples examples/benchmarks/bert/src/bert_layers.py. BertEmbeddings
//    (no position embeddings); BertUnpadSelfAttention (Wqkv's rows [3, H, D] as rearrange
//    'b s (t h d)' with t = 3 splits them, q k^T / sqrt(D) + ALiBi); BertSelfOutput
//    (LayerNorm(dense(h) + input)); BertGatedLinearUnitMLP (gated_layers without bias, its first
//    half through nn.GELU(approximate='none') times the second, wo, LayerNorm(wo(h) + input));
//    BertEncoder.rebuild_alibi_tensor (Press's slopes, _get_alibi_head_slopes for any head count,
//    -m |i - j|, rebuilt past alibi_starting_size, never clipped: xtrap computes it for every
//    length); BertPredictionHeadTransform (its LayerNorm's eps is 1e-12 whatever layer_norm_eps
//    says); BertLMPredictionHead (decoder.weight tied, decoder.bias).
//  - jinabert: jinaai/jina-bert-implementation modeling_bert.py (the encoder of
//    jina-embeddings-v2): Hugging Face BERT's separate query/key/value and BertSelfOutput,
//    JinaBertGLUMLP (gated_layers, first half gated, nn.GELU() for geglu, nn.ReLU() for reglu, wo,
//    layernorm), JinaBertEncoder's symmetric ALiBi with Press's slopes rebuilt for every length.
//  - bert, roberta: transformers' modeling_bert.py / modeling_roberta.py, learned absolute
//    positions (RoBERTa's from padding_idx + 1), BertIntermediate / BertOutput.
#include <fmt/format.h>

#include "run/families/families.h"

namespace xtrap {
namespace {

// What every BERT-layout encoder shares; `pos` its position method.
PretrainedConfig readBertLayout(const ConfigReader& r, const std::string& modelType, const std::string& pos) {
  PretrainedConfig p = pretrainedDecoder(modelType, pos);
  ModelConfig& m = p.model;
  m.arch = "encoder";
  m.bos = false;  // [CLS] and [SEP] come from the tokenizer, not from an xtrap <bos>
  m.head = "roberta";
  m.blockNorms = "post";
  m.finalNorm = false;
  m.embeddingNorm = true;
  m.vocabSize = r.integer({"vocab_size"});
  m.dModel = r.integer({"hidden_size"});
  m.layers = r.integer({"num_hidden_layers"});
  m.heads = r.integer({"num_attention_heads"});
  if (m.dModel % m.heads != 0)
    r.fail(fmt::format("num_attention_heads ({}) must divide hidden_size ({})", m.heads, m.dModel));
  m.ffn = r.integer({"intermediate_size"});
  m.tokenTypes = r.integer("type_vocab_size", 2);
  m.normEps = r.number({"layer_norm_eps"}, 1e-12);
  m.headNormEps = m.normEps;
  // hidden_act is the MLP's and the head transform's activation (ACT2FN): exact GELU only.
  std::string act = r.text("hidden_act", "gelu");
  if (act != "gelu") r.fail("hidden_act '" + act + "' is not supported (xtrap computes gelu, the exact one)");
  m.activation = "gelu";
  return p;
}

PretrainedConfig readMosaicBert(const ConfigReader& r) {
  PretrainedConfig p = readBertLayout(r, "mosaicbert", "alibi");
  ModelConfig& m = p.model;
  m.gatedMlp = true;
  m.fc1Bias = false;
  m.headNormEps = 1e-12;  // BertPredictionHeadTransform's, fixed
  // The length the model's code builds its bias for; mosaic-bert-base was trained at 128.
  m.contextLength = r.integer("alibi_starting_size", 512);
  return p;
}

PretrainedConfig readJinaBert(const ConfigReader& r) {
  PretrainedConfig p = readBertLayout(r, "jinabert", "alibi");
  ModelConfig& m = p.model;
  std::string ffn = r.text("feed_forward_type", "original");
  if (ffn != "geglu" && ffn != "reglu") r.fail("feed_forward_type '" + ffn + "' is not supported (geglu, reglu)");
  m.gatedMlp = true;
  m.fc1Bias = false;
  m.activation = ffn == "geglu" ? "gelu" : "relu";
  // jina-embeddings-v2 was trained at 512 tokens (its config's max_position_embeddings, 8192, is
  // the length it is meant to be used at).
  m.contextLength = 512;
  return p;
}

PretrainedConfig readBert(const ConfigReader& r) {
  PretrainedConfig p = readBertLayout(r, "bert", "learned");
  p.model.maxPositions = r.integer("max_position_embeddings", 512);
  p.model.contextLength = p.model.maxPositions;
  return p;
}

PretrainedConfig readRoberta(const ConfigReader& r) {
  PretrainedConfig p = readBertLayout(r, "roberta", "learned");
  ModelConfig& m = p.model;
  m.tokenTypes = r.integer("type_vocab_size", 1);
  // create_position_ids_from_input_ids: the first token's position is padding_idx + 1.
  m.positionOffset = r.tokenId("pad_token_id", 1) + 1;
  m.maxPositions = r.integer("max_position_embeddings", 514);
  if (m.maxPositions <= m.positionOffset)
    r.fail(fmt::format("max_position_embeddings ({}) leaves no position after pad_token_id + 1", m.maxPositions));
  m.contextLength = m.maxPositions - m.positionOffset;
  return p;
}

// The tensor layouts: fused Wqkv or separate projections, gated or plain MLP, the head's names.
enum class BertLayout { Mosaic, Jina, Bert, Roberta };

TensorMap bertTensors(const ModelConfig& c, BertLayout layout) {
  TensorMap t;
  auto both = [&](const std::string& ours, const std::string& theirs) {
    t[ours + ".weight"] = {{theirs + ".weight"}};
    t[ours + ".bias"] = {{theirs + ".bias"}};
  };
  // A LayerNorm: bert-base-uncased's weights, converted from TensorFlow, still say gamma and beta
  // (transformers renames them when it loads).
  auto norm = [&](const std::string& ours, const std::string& theirs) {
    t[ours + ".weight"] = {{theirs + ".weight"}, TensorLayout::AsStored, {}, {theirs + ".gamma"}};
    t[ours + ".bias"] = {{theirs + ".bias"}, TensorLayout::AsStored, {}, {theirs + ".beta"}};
  };
  t["token_embedding.weight"] = {{"embeddings.word_embeddings.weight"}};
  t["type_embedding.weight"] = {{"embeddings.token_type_embeddings.weight"}};
  if (c.position() == PositionMethod::Learned)
    t["position_embedding.weight"] = {{"embeddings.position_embeddings.weight"}};
  norm("embedding_norm", "embeddings.LayerNorm");
  for (int64_t l = 0; l < c.layers; ++l) {
    std::string b = fmt::format("blocks.{}.", l), e = fmt::format("encoder.layer.{}.", l);
    if (layout == BertLayout::Mosaic) {
      both(b + "attn.qkv", e + "attention.self.Wqkv");
    } else {
      std::vector<int64_t> rows(3, c.dModel);
      t[b + "attn.qkv.weight"] = {
          {e + "attention.self.query.weight", e + "attention.self.key.weight", e + "attention.self.value.weight"},
          TensorLayout::AsStored,
          rows};
      t[b + "attn.qkv.bias"] = {
          {e + "attention.self.query.bias", e + "attention.self.key.bias", e + "attention.self.value.bias"},
          TensorLayout::AsStored,
          rows};
    }
    both(b + "attn.out", e + "attention.output.dense");
    norm(b + "ln1", e + "attention.output.LayerNorm");
    if (layout == BertLayout::Mosaic || layout == BertLayout::Jina) {
      t[b + "fc1.weight"] = {{e + "mlp.gated_layers.weight"}};
      both(b + "fc2", e + "mlp.wo");
      norm(b + "ln2", e + "mlp.layernorm");
    } else {
      both(b + "fc1", e + "intermediate.dense");
      both(b + "fc2", e + "output.dense");
      norm(b + "ln2", e + "output.LayerNorm");
    }
  }
  if (c.head == "none") return t;
  if (layout == BertLayout::Roberta) {
    both("head.dense", "lm_head.dense");
    norm("head.norm", "lm_head.layer_norm");
    t["head.bias"] = {{"lm_head.bias"}, TensorLayout::AsStored, {}, {"lm_head.decoder.bias"}};
  } else {
    both("head.dense", "cls.predictions.transform.dense");
    norm("head.norm", "cls.predictions.transform.LayerNorm");
    t["head.bias"] = {{"cls.predictions.bias"}, TensorLayout::AsStored, {}, {"cls.predictions.decoder.bias"}};
  }
  return t;
}

TensorMap mosaicTensors(const ModelConfig& c) { return bertTensors(c, BertLayout::Mosaic); }
TensorMap jinaTensors(const ModelConfig& c) { return bertTensors(c, BertLayout::Jina); }
TensorMap plainBertTensors(const ModelConfig& c) { return bertTensors(c, BertLayout::Bert); }
TensorMap robertaTensors(const ModelConfig& c) { return bertTensors(c, BertLayout::Roberta); }

bool isMosaicBert(const nlohmann::json& config, const TensorNames& tensors) {
  if (config.contains("alibi_starting_size")) return true;
  for (const auto& name : tensors)
    if (name.find(".attention.self.Wqkv.") != std::string::npos) return true;
  return false;
}

bool isJinaBert(const nlohmann::json& config, const TensorNames&) {
  return config.value("position_embedding_type", nlohmann::json()) == "alibi";
}

// Keys every BERT-layout config has that change nothing at inference: dropout, the position
// embedding table's size where there is none, task heads' settings.
std::vector<std::string> bertInert(std::vector<std::string> more) {
  const std::vector<std::string> shared{"hidden_dropout_prob", "attention_probs_dropout_prob", "classifier_dropout",
                                        "gradient_checkpointing"};
  more.insert(more.begin(), shared.begin(), shared.end());
  return more;
}

std::vector<std::string> bertComputed(std::vector<std::string> more) {
  const std::vector<std::string> shared{"vocab_size",          "hidden_size",       "num_hidden_layers",
                                        "num_attention_heads", "intermediate_size", "type_vocab_size",
                                        "layer_norm_eps",      "hidden_act"};
  more.insert(more.begin(), shared.begin(), shared.end());
  return more;
}

// A decoder's cross-attention is never an encoder's; the decoder is the word embeddings (the
// stored cls.predictions.decoder.weight is their copy); learned-position families compute
// absolute position embeddings only.
std::vector<RefusedKey> bertRefused(bool learnedPositions) {
  std::vector<RefusedKey> keys{{"add_cross_attention", false, "cross-attention layers of a decoder"},
                               {"tie_word_embeddings", true, "a masked-LM decoder of its own, untied"}};
  if (learnedPositions)
    keys.push_back(
        {"position_embedding_type", "absolute", "relative position embeddings (relative_key, relative_key_query)"});
  return keys;
}

// Tensors of BERT checkpoints the masked-LM logits never read: the pooler, the next-sentence
// head, the decoder's tied copy of the word embeddings, buffers some versions save.
const std::vector<std::string> kBertUnread{"pooler.", "cls.seq_relationship.", "cls.predictions.decoder.weight",
                                           "embeddings.position_ids", "embeddings.token_type_ids"};

}  // namespace

const PretrainedFamily& mosaicBertFamily() {
  static const PretrainedFamily f{{"bert"},
                                  bertComputed({"alibi_starting_size"}),
                                  // max_position_embeddings sizes an unused token-type buffer; position_embedding_type
                                  // says "absolute" in the Hub's configs and is not read by bert_layers.py.
                                  bertInert({"max_position_embeddings", "position_embedding_type"}),
                                  bertRefused(false),
                                  {"bert."},
                                  readMosaicBert,
                                  mosaicTensors,
                                  "mosaicbert",
                                  isMosaicBert,
                                  "cls.predictions.transform.dense.weight",
                                  kBertUnread};
  return f;
}

const PretrainedFamily& jinaBertFamily() {
  static const PretrainedFamily f{{"bert"},
                                  bertComputed({"feed_forward_type", "position_embedding_type"}),
                                  // emb_pooler: sentence embeddings only; attn_implementation: SDPA or the matmul path,
                                  // the same attention; max_position_embeddings: no table with ALiBi.
                                  bertInert({"max_position_embeddings", "emb_pooler", "attn_implementation"}),
                                  bertRefused(false),
                                  {"bert."},
                                  readJinaBert,
                                  jinaTensors,
                                  "jinabert",
                                  isJinaBert,
                                  "cls.predictions.transform.dense.weight",
                                  kBertUnread};
  return f;
}

const PretrainedFamily& bertFamily() {
  static const PretrainedFamily f{{"bert"},         bertComputed({"max_position_embeddings"}),
                                  bertInert({}),    bertRefused(true),
                                  {"bert."},        readBert,
                                  plainBertTensors, "bert",
                                  nullptr,          "cls.predictions.transform.dense.weight",
                                  kBertUnread};
  return f;
}

const PretrainedFamily& robertaFamily() {
  static const PretrainedFamily f{
      {"roberta"},
      bertComputed({"max_position_embeddings", "pad_token_id"}),
      bertInert({}),
      bertRefused(true),
      {"roberta."},
      readRoberta,
      robertaTensors,
      "",
      nullptr,
      "lm_head.dense.weight",
      {"pooler.", "lm_head.decoder.weight", "embeddings.position_ids", "embeddings.token_type_ids"}};
  return f;
}

}  // namespace xtrap
