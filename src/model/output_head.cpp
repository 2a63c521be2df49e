#include "model/output_head.h"

#include "model/linear_nll.h"
#include "util/execution_context.h"

namespace xtrap {
namespace F = torch::nn::functional;

OutputHeadImpl::OutputHeadImpl(const ModelConfig& config, torch::Tensor tokenEmbedding)
    : kind(config.headKind()), embedding(std::move(tokenEmbedding)) {
  int64_t C = config.dModel, V = config.vocabSize;
  if (kind == OutputHeadKind::Roberta) {
    dense = register_module("dense", torch::nn::Linear(C, C));
    norm = register_module("norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({C})));
    bias = register_parameter("bias", torch::zeros({V}, torch::kFloat32));
  } else if (kind == OutputHeadKind::Clap) {
    beta = register_parameter("beta", torch::full({1}, config.clapBeta, torch::kFloat32));
  } else if (!config.adaptiveSoftmaxCutoffs.empty()) {
    adaptive = register_module(
        "adaptive",
        torch::nn::AdaptiveLogSoftmaxWithLoss(
            torch::nn::AdaptiveLogSoftmaxWithLossOptions(C, V, config.adaptiveSoftmaxCutoffs).div_value(4.0)));
  }
}

torch::Tensor OutputHeadImpl::projection() const {
  return kind == OutputHeadKind::Clap ? F::normalize(embedding, F::NormalizeFuncOptions().dim(1)) : embedding;
}

torch::Tensor OutputHeadImpl::logits(const torch::Tensor& x) {
  if (adaptive) return adaptive->log_prob(x);
  // The float32 LayerNorm takes a float32 input (LibTorch 1.13's CPU autocast does not cast it).
  if (kind == OutputHeadKind::Roberta)
    return norm(torch::gelu(dense(x)).to(torch::kFloat32)).matmul(embedding.t()) + bias;
  if (kind == OutputHeadKind::Clap) return beta * x.matmul(projection().t());
  return x.matmul(embedding.t());
}

torch::Tensor OutputHeadImpl::nll(const torch::Tensor& x, const torch::Tensor& targets) {
  if (adaptive) {
    // LibTorch's module takes its own log-softmax of its projections: all of it in float32.
    AutocastScope float32(x.device(), torch::kFloat32);
    return -adaptive->forward(x.to(torch::kFloat32), targets).output;
  }
  // The formulas of logits(), in row blocks: never N x V logits at once (linear_nll.h).
  if (kind == OutputHeadKind::Roberta)
    return linearNll(norm(torch::gelu(dense(x)).to(torch::kFloat32)), embedding, bias, targets);
  if (kind == OutputHeadKind::Clap) return linearNll(beta * x, projection(), {}, targets);
  return linearNll(x, embedding, {}, targets);
}

}  // namespace xtrap
