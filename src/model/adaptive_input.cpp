#include "model/adaptive_input.h"

namespace xtrap {

AdaptiveInputImpl::AdaptiveInputImpl(int64_t dModel, torch::nn::AdaptiveLogSoftmaxWithLoss softmax)
    : softmax_(std::move(softmax)) {
  shortlistProjection =
      register_module("shortlist_projection", torch::nn::Linear(torch::nn::LinearOptions(dModel, dModel).bias(false)));
}

std::vector<AdaptiveInputImpl::Band> AdaptiveInputImpl::bands() {
  const auto& cutoffs = softmax_->cutoffs;  // the shortlist's end, ..., the vocabulary size
  std::vector<Band> bands;
  bands.push_back({0, cutoffs[0], softmax_->head->weight.narrow(0, 0, cutoffs[0]), shortlistProjection->weight.t()});
  for (size_t i = 0; i + 1 < cutoffs.size(); ++i) {
    auto& tail = *softmax_->tail[i]->as<torch::nn::Sequential>();
    bands.push_back({cutoffs[i], cutoffs[i + 1], tail[1]->as<torch::nn::Linear>()->weight,  // (n, C / 4^(i+1))
                     tail[0]->as<torch::nn::Linear>()->weight});                            // (C / 4^(i+1), C)
  }
  return bands;
}

void AdaptiveInputImpl::initialise() {
  torch::NoGradGuard noGrad;
  for (const Band& band : bands()) {
    band.embedding.normal_(0.0, 1.0 / std::sqrt(double(band.embedding.size(1))));
    torch::nn::init::xavier_uniform_(band.projection);
  }
}

torch::Tensor AdaptiveInputImpl::forward(const torch::Tensor& tokens) {
  auto ids = tokens.reshape({-1});                              // (N)
  std::vector<std::pair<torch::Tensor, torch::Tensor>> pieces;  // (rows (n), vectors (n, C))
  for (const Band& band : bands()) {
    auto rows = ((ids >= band.start) & (ids < band.end)).nonzero().squeeze(1);
    if (rows.numel() == 0) continue;
    auto vectors = torch::embedding(band.embedding, ids.index_select(0, rows) - band.start);  // (n, C / 4^b)
    pieces.emplace_back(rows, vectors.matmul(band.projection));
  }
  TORCH_CHECK(!pieces.empty(), "adaptive input: no tokens");
  int64_t C = shortlistProjection->weight.size(0);
  auto x = torch::zeros({ids.size(0), C}, pieces.front().second.options());  // (N, C)
  for (auto& [rows, vectors] : pieces) x = x.index_add(0, rows, vectors.to(x.scalar_type()));
  auto shape = tokens.sizes().vec();
  shape.push_back(C);
  return x.view(shape);  // (B, T, C)
}

}  // namespace xtrap
