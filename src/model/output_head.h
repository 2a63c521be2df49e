#pragma once
// From final features to vocabulary scores. All heads are tied to the token embedding E (V, C):
//  - lm:      logits = x E^T                      (or LibTorch's adaptive softmax, untied from E;
//                                                  with adaptive input the input is tied to it;
//                                                  or, untied (ModelConfig::tiedHead false), x W^T
//                                                  with its own W (V, C))
//  - roberta: logits = LayerNorm(GELU(x W + b)) E^T + bias   (BERT's masked-LM head as well)
//  - clap:    logits = beta * x normalize(E)^T    (rows of E L2-normalised, beta learned)
//  - none:    no scores (a pretrained encoder saved without its head); logits() and nll() throw
// Scores are computed in the compute precision of the autocast scope the caller opened (the
// model's); log-softmax and the NLL always in float32. A final soft-cap (Gemma 2) maps the logits
// to cap * tanh(logits / cap), in float32.
// N = rows scored, C = d_model, V = vocabulary.
#include <torch/torch.h>

#include "model/model_config.h"

namespace xtrap {

struct OutputHeadImpl : torch::nn::Module {
  OutputHeadImpl(const ModelConfig& config, torch::Tensor tokenEmbedding);
  torch::Tensor logits(const torch::Tensor& x);                             // (N,C) -> (N,V)
  torch::Tensor nll(const torch::Tensor& x, const torch::Tensor& targets);  // per row, (N) float32
  // The embedding the head projects onto (normalised for clap); inputs use the same vectors.
  torch::Tensor projection() const;
  torch::Tensor adaptiveNll(const torch::Tensor& x, const torch::Tensor& targets);  // (N,C) -> (N)

  OutputHeadKind kind;
  torch::Tensor embedding;  // shared with the model's token embedding, or the untied head's own (V, C)
  double softcap;           // ModelConfig::finalSoftcap; 0 = none
  torch::nn::Linear dense{nullptr};
  torch::nn::LayerNorm norm{nullptr};
  torch::Tensor bias, beta;
  torch::nn::AdaptiveLogSoftmaxWithLoss adaptive{nullptr};
  double dropout;  // adaptive softmax only (ModelConfig::adaptiveSoftmaxDropout)
};
TORCH_MODULE(OutputHead);

}  // namespace xtrap
