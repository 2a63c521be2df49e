#pragma once
// Architecture of one xtrap model; saved in run.json so eval/probe rebuild it without flags.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "data/mlm_masking.h"
#include "data/vocabulary.h"
#include "model/position_method.h"

namespace xtrap {

enum class OutputHeadKind { Lm, Roberta, Clap };

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
  // FFN activation: gelu (exact, erf form) | gelu-tanh (the tanh approximation, BLOOM's) | relu
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

  // The names --arch, --head, --activation and --alibi-init accept (validate() checks them; --help
  // lists them).
  static const std::vector<std::string>& archNames();
  static const std::vector<std::string>& headNames();
  static const std::vector<std::string>& activationNames();
  static const std::vector<std::string>& alibiInitNames();

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
  // Throws std::invalid_argument with a one-line reason for any inconsistent setting.
  void validate() const;
};

void to_json(nlohmann::json& j, const ModelConfig& c);
void from_json(const nlohmann::json& j, ModelConfig& c);

}  // namespace xtrap
