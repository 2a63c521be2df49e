#include "model/output_head.h"

namespace xtrap {
namespace F = torch::nn::functional;

OutputHeadImpl::OutputHeadImpl(const ModelConfig& config, torch::Tensor tokenEmbedding)
    : kind(config.head), embedding(std::move(tokenEmbedding)) {
  int64_t C = config.dModel, V = config.vocabSize;
  if (kind == "roberta") {
    dense = register_module("dense", torch::nn::Linear(C, C));
    norm = register_module("norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({C})));
    bias = register_parameter("bias", torch::zeros({V}));
  } else if (kind == "clap") {
    beta = register_parameter("beta", torch::full({1}, config.clapBeta));
  } else if (!config.adaptiveSoftmaxCutoffs.empty()) {
    adaptive = register_module(
        "adaptive",
        torch::nn::AdaptiveLogSoftmaxWithLoss(
            torch::nn::AdaptiveLogSoftmaxWithLossOptions(C, V, config.adaptiveSoftmaxCutoffs).div_value(4.0)));
  }
}

torch::Tensor OutputHeadImpl::projection() const {
  return kind == "clap" ? F::normalize(embedding, F::NormalizeFuncOptions().dim(1)) : embedding;
}

torch::Tensor OutputHeadImpl::logits(const torch::Tensor& x) {
  if (adaptive) return adaptive->log_prob(x);
  if (kind == "roberta") return norm(torch::gelu(dense(x))).matmul(embedding.t()) + bias;
  if (kind == "clap") return beta * x.matmul(projection().t());
  return x.matmul(embedding.t());
}

torch::Tensor OutputHeadImpl::nll(const torch::Tensor& x, const torch::Tensor& targets) {
  if (adaptive) return -adaptive->forward(x, targets).output;
  return F::cross_entropy(logits(x), targets, F::CrossEntropyFuncOptions().reduction(torch::kNone));
}

}  // namespace xtrap
