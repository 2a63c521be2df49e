#include "model/output_head.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "model/fast_dropout.h"
#include "model/linear_nll.h"

namespace xtrap {
namespace F = torch::nn::functional;

OutputHeadImpl::OutputHeadImpl(const ModelConfig& config, torch::Tensor tokenEmbedding)
    : kind(config.headKind()),
      embedding(std::move(tokenEmbedding)),
      softcap(config.finalSoftcap),
      dropout(config.adaptiveSoftmaxDropout) {
  int64_t C = config.dModel, V = config.vocabSize;
  if (!config.tiedHead) {
    embedding = register_parameter("weight", torch::empty({V, C}));
    torch::nn::init::normal_(embedding, 0.0, 1.0 / std::sqrt(double(C)));
  }
  if (kind == OutputHeadKind::Roberta) {
    dense = register_module("dense", torch::nn::Linear(C, C));
    norm = register_module(
        "norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({C}).eps(config.headNormEps.value_or(1e-5))));
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

namespace {
[[noreturn]] void noHead() {
  throw std::invalid_argument("the model was saved without its masked-LM head: it has features (probes), no scores");
}
}  // namespace

torch::Tensor OutputHeadImpl::logits(const torch::Tensor& x) {
  if (kind == OutputHeadKind::None) noHead();
  if (adaptive) return adaptive->log_prob(x);
  // The float32 LayerNorm takes a float32 input (LibTorch 1.13's CPU autocast does not cast it).
  if (kind == OutputHeadKind::Roberta)
    return norm(torch::gelu(dense(x)).to(torch::kFloat32)).matmul(embedding.t()) + bias;
  if (kind == OutputHeadKind::Clap) return beta * x.matmul(projection().t());
  auto z = x.matmul(embedding.t());  // (N, V)
  return softcap > 0 ? torch::tanh(z.to(torch::kFloat32) / softcap) * softcap : z;
}

namespace {
// -log softmax(cap * tanh(x W^T / cap))[target] in row blocks of at most kMaxBlockLogits logits:
// the soft-cap between the product and the softmax rules out linearNll's running log-sum-exp over
// blocks of classes, so each block of rows takes its whole (rows, V) logits at once.
torch::Tensor softcappedNll(const torch::Tensor& x, const torch::Tensor& weight, double cap,
                            const torch::Tensor& targets) {
  int64_t N = x.size(0), V = weight.size(0), rows = std::max<int64_t>(1, kMaxBlockLogits / std::max<int64_t>(V, 1));
  std::vector<torch::Tensor> nll;
  for (int64_t r0 = 0; r0 < N; r0 += rows) {
    int64_t n = std::min(rows, N - r0);
    auto z = torch::tanh(x.narrow(0, r0, n).matmul(weight.t()).to(torch::kFloat32) / cap) * cap;  // (n, V)
    nll.push_back(-torch::log_softmax(z, -1).gather(1, targets.narrow(0, r0, n).unsqueeze(1)).squeeze(1));
  }
  return nll.empty() ? torch::zeros({0}, x.options().dtype(torch::kFloat32)) : torch::cat(nll);
}
}  // namespace

torch::Tensor OutputHeadImpl::adaptiveNll(const torch::Tensor& x, const torch::Tensor& targets) {
  // LibTorch's adaptive softmax with its own parameters, each softmax in blocks of classes
  // (linear_nll.h): its forward holds the log-softmax of every row of a cluster over the whole
  // cluster (about 1,000 rows x 257,000 words per step on WikiText-103). Its products run in the
  // compute precision, as logits() and the other heads' do (fairseq's adaptive softmax trains in
  // fp16 with the rest of the model); each softmax is float32 in linearNll. In float32 they took
  // 17% of a bf16 training step on the H100 (results/gpu.md), on the GPU's CUDA cores.
  // fairseq's adaptive softmax dropout: on the input, and between each tail's two layers.
  bool train = is_training();
  auto xf = fastDropout(x, dropout, train);  // (N, C)
  const auto& cutoffs = adaptive->cutoffs;   // the shortlist's end, ..., the vocabulary size
  auto headTargets = targets.clone();        // a word of the shortlist, or its cluster's entry
  std::vector<torch::Tensor> clusterRows;
  for (size_t i = 0; i + 1 < cutoffs.size(); ++i) {
    auto rows = ((targets >= cutoffs[i]) & (targets < cutoffs[i + 1])).nonzero().squeeze(1);
    headTargets.index_fill_(0, rows, adaptive->shortlist_size + int64_t(i));
    clusterRows.push_back(rows);
  }
  auto headBias = adaptive->head->options.bias() ? adaptive->head->bias : torch::Tensor();
  auto nll = linearNll(xf, adaptive->head->weight, headBias, headTargets);  // (N)
  for (size_t i = 0; i < clusterRows.size(); ++i) {
    const auto& rows = clusterRows[i];
    if (rows.numel() == 0) continue;
    auto& tail = *adaptive->tail[i]->as<torch::nn::Sequential>();
    auto hidden = fastDropout(tail[0]->as<torch::nn::Linear>()->forward(xf.index_select(0, rows)), dropout,
                              train);  // (n, C / 4^(i+1))
    auto within =
        linearNll(hidden, tail[1]->as<torch::nn::Linear>()->weight, {}, targets.index_select(0, rows) - cutoffs[i]);
    nll = nll.index_add(0, rows, within);
  }
  return nll;
}

torch::Tensor OutputHeadImpl::nll(const torch::Tensor& x, const torch::Tensor& targets) {
  if (kind == OutputHeadKind::None) noHead();
  if (adaptive) return adaptiveNll(x, targets);
  // The formulas of logits(), in row blocks: never N x V logits at once (linear_nll.h).
  if (kind == OutputHeadKind::Roberta)
    return linearNll(norm(torch::gelu(dense(x)).to(torch::kFloat32)), embedding, bias, targets);
  if (kind == OutputHeadKind::Clap) return linearNll(beta * x, projection(), {}, targets);
  if (softcap > 0) return softcappedNll(x, embedding, softcap, targets);
  return linearNll(x, embedding, {}, targets);
}

}  // namespace xtrap
