#pragma once
// Architecture of one xtrap model; saved in run.json so eval/probe rebuild it without flags.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "data/mlm_masking.h"
#include "data/vocabulary.h"
#include "model/position/rope_scaling.h"
#include "model/position_method.h"

namespace xtrap {

// None: a pretrained encoder saved without its masked-LM head (features only: probes, no scores).
enum class OutputHeadKind { Lm, Roberta, Clap, None };

struct ModelConfig {
  std::string arch = "decoder";  // decoder (causal LM) | encoder (masked LM)
  int64_t vocabSize = 0;         // the data's words, then <mask> and <bos> where used (see wordCount())
  int64_t layers = 4;
  int64_t dModel = 128;
  int64_t heads = 8;
  int64_t ffn = 512;                        // hidden width of the feed-forward block
  double dropout = 0.1;                     // embedding and residual dropout; the others' default
  std::optional<double> attentionDropout;   // on attention probabilities; unset = dropout
  std::optional<double> activationDropout;  // on the FFN's hidden activations; unset = dropout
  // FFN activation: gelu (exact, erf form) | gelu-tanh (the tanh approximation, BLOOM's) | relu |
  // silu (SwiGLU's gate)
  std::string activation = "gelu";
  bool finalNorm = true;                        // LayerNorm after the last block, before the head
  std::string pos = "alibi";                    // see positionMethodNames()
  int64_t contextLength = 512;                  // L: training context
  int64_t maxPositions = 0;                     // learned table size; 0 = contextLength
  std::string head = "lm";                      // lm (tied) | roberta | clap
  std::vector<int64_t> adaptiveSoftmaxCutoffs;  // empty = full softmax
  double adaptiveSoftmaxDropout = 0.0;          // on the softmax's input and inside its tails (fairseq's)
  // Adaptive input embeddings tied to the adaptive softmax (model/adaptive_input.h) instead of a
  // V x C token embedding.
  bool adaptiveInput = false;
  bool scaleEmbedding = true;  // multiply token embeddings by sqrt(dModel)
  double clapBeta = 1.0;       // initial inverse temperature of the CLAP head
  // Learned slopes' init: random (p ~ N(-2,1)) | standard; empty = the variant's documented default
  // (alibi-learned: random, bialibi: standard). run.json stores the init used.
  std::string alibiInit;
  // Encoders: prepend a <bos> token to every window (never masked, never scored); unset = on for
  // bialibi (its first-token bias is for a global token), off otherwise. Old run.json files have
  // no key: off.
  std::optional<bool> bos;
  double rotaryBase = 10000.0;
  int64_t t5Buckets = 32;
  int64_t t5MaxDistance = 128;
  uint64_t initSeed = 1;  // seeds parameter initialisation
  // Settings that pretrained checkpoints need (run/pretrained_config.h); xtrap's own runs keep
  // the defaults (run.json files from before them read as the defaults).
  bool embeddingNorm = false;     // a LayerNorm on the token embeddings, before the blocks (BLOOM)
  bool linearBiases = true;       // false: no bias on any Linear (MPT; its LayerNorm biases stay zero)
  double normEps = 1e-5;          // every LayerNorm's epsilon
  std::optional<double> clipQkv;  // clamp the q, k, v projections to [-clip, clip] (MPT's clip_qkv)
  // The ALiBi slopes: press (Press et al., BLOOM's) | mpt (2^(-h * alibiBiasMax / n'), n' the
  // next power of two, MPT's interleaving for other head counts; linear_bias_spec.h).
  std::string alibiSlopes = "press";
  double alibiBiasMax = 8.0;  // mpt slopes only
  // The parts a block is built from (STYLE.md item 9); the defaults are xtrap's own blocks, and
  // the pretrained loader (run/pretrained_config.h) maps each family's config onto them.
  std::string norm = "layer";  // layer | rms (RMSNorm, statistics in float32) | rms-one-plus (x_hat * (1 + w))
  // pre: a norm before each branch (ln1, ln2) | sandwich: also one on each branch's output,
  // before its residual add (Gemma 2/3's four norms per block) | post: a norm after each residual
  // add and none before the branches, x = ln1(x + attn(x)), x = ln2(x + mlp(x)) (BERT's)
  std::string blockNorms = "pre";
  bool gatedMlp = false;  // down(act(gate x) * up x) (SwiGLU with silu, GeGLU with gelu-tanh); else fc2(act(fc1 x))
  std::optional<bool>
      fc1Bias;          // a bias on the MLP's first layer (none on MosaicBERT's gated one); unset = linearBiases
  int64_t kvHeads = 0;  // key/value heads (grouped-query attention, never repeated in memory); 0 = heads
  int64_t headDim = 0;  // each head's width; 0 = dModel / heads
  std::optional<bool> qkvBias;  // biases on the q, k, v projections (Qwen2); unset = linearBiases
  bool qkNorm = false;          // a per-head norm (the model's kind) on q and k before the rotation
  // Sliding-window attention: query i sees keys i - W < j <= i in the windowed layers (all layers
  // when the list is empty); 0 = no window.
  int64_t attentionWindow = 0;
  std::vector<int64_t> windowedLayers;
  double attentionSoftcap = 0.0;       // logits -> cap * tanh(logits / cap) before the mask; 0 = none
  double finalSoftcap = 0.0;           // the same on the output head's logits; 0 = none
  std::optional<double> queryScale;    // the factor of q.k; unset = 1 / sqrt(head dim)
  bool tiedHead = true;                // lm head: the token embedding (else its own (V, C) weight)
  bool embeddingScaleRounded = false;  // sqrt(dModel) rounded to the compute precision first (Gemma)
  double rotaryFraction = 1.0;         // the share of each head's channels rotated (partial rotary)
  double rotaryLocalBase = 0.0;        // windowed layers' rotary base, without rope scaling (Gemma 3); 0 = rotaryBase
  RopeScaling ropeScaling;             // rotary: the checkpoint's own frequency scaling
  // ALiBi-family fixed slopes divided as `eval --interp` linear | ntk divides them at factor
  // alibiInterpFactor: an adapted run's baked slope interpolation (train --init, docs/adapt.md);
  // none = the slopes as the method defines them.
  std::string alibiInterp = "none";
  double alibiInterpFactor = 1.0;
  // BERT's token-type embeddings: a (tokenTypes, C) table whose row 0 is added to every token's
  // embedding (every token is of type 0); 0 = none.
  int64_t tokenTypes = 0;
  // Learned positions: the first token's row of the table (RoBERTa's padding_idx + 1 = 2).
  int64_t positionOffset = 0;
  std::optional<double> headNormEps;  // the roberta head's LayerNorm epsilon; unset = 1e-5 (MosaicBERT: 1e-12)

  // The names --arch, --head, --activation and --alibi-init accept (validate() checks them; --help
  // lists them).
  static const std::vector<std::string>& archNames();
  static const std::vector<std::string>& headNames();
  static const std::vector<std::string>& activationNames();
  static const std::vector<std::string>& alibiInitNames();
  static const std::vector<std::string>& normNames();
  static const std::vector<std::string>& blockNormsNames();

  bool causal() const { return arch == "decoder"; }
  double attentionDropoutRate() const { return attentionDropout.value_or(dropout); }
  double activationDropoutRate() const { return activationDropout.value_or(dropout); }
  PositionMethod position() const { return parsePositionMethod(pos); }
  OutputHeadKind headKind() const;  // throws on an unknown name (validate() says which)
  std::string resolvedAlibiInit() const;
  bool usesBos() const { return !causal() && bos.value_or(position() == PositionMethod::BiAlibi); }
  // Encoder ids: the data's words are [0, wordCount()), then <mask> = wordCount(), then <bos>.
  int64_t specialTokens() const { return causal() ? 0 : 1 + (usesBos() ? 1 : 0); }
  int64_t wordCount() const { return vocabSize - specialTokens(); }
  int64_t maskId() const { return wordCount(); }
  int64_t bosId() const { return wordCount() + 1; }
  // Encoders: the ids masked-LM corruption uses, the data's vocabulary giving the real words.
  MlmTokens mlmTokens(const Vocabulary& data) const;
  // Encoders: the words of a training window (L, less the <bos> slot), also the aligned block of
  // evaluation masking (mlm_masking.h).
  int64_t windowWords() const { return contextLength - (usesBos() ? 1 : 0); }
  int64_t positionTableSize() const { return maxPositions > 0 ? maxPositions : contextLength; }
  bool resolvedFc1Bias() const { return fc1Bias.value_or(linearBiases); }
  int64_t resolvedKvHeads() const { return kvHeads > 0 ? kvHeads : heads; }
  int64_t resolvedHeadDim() const { return headDim > 0 ? headDim : dModel / heads; }
  bool resolvedQkvBias() const { return qkvBias.value_or(linearBiases); }
  // The window of layer `layer`: attentionWindow where it is windowed, else 0.
  int64_t layerWindow(int64_t layer) const;
  // The channels of a head the rotation turns (even).
  int64_t rotaryDim() const;
  // Whether any block part differs from xtrap's own blocks (LayerNorm, plain MLP, H kv heads,
  // ...), and which, comma-separated: what the export format cannot describe yet.
  bool hasPretrainedParts() const { return !pretrainedPartsSummary().empty(); }
  std::string pretrainedPartsSummary() const;
  // Throws std::invalid_argument with a one-line reason for any inconsistent setting.
  void validate() const;
};

void to_json(nlohmann::json& j, const ModelConfig& c);
void from_json(const nlohmann::json& j, ModelConfig& c);

}  // namespace xtrap
