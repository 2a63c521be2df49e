#pragma once
// Adaptive input embeddings (Baevski & Auli 2019) tied to the adaptive softmax, as fairseq's
// transformer_lm_wiki103 has them (adaptive_input, tie_adaptive_weights, tie_adaptive_proj).
// The softmax's cutoffs cut the vocabulary into bands; band b holds ids [start_b, end_b), each id
// a vector of width C / 4^b projected to C:
//  - band 0: the shortlist rows of the softmax head (C wide, the head scores x . e_w with them)
//    and a C x C projection of its own (fairseq's band 0 projection is not tied either);
//  - band b > 0: the output layer of softmax tail b-1 (its rows are the band's words) and the
//    transpose of that tail's input projection (C -> C / 4^b there, C / 4^b -> C here).
// The tensors are read from the softmax module on every call, never copied: the input and the
// output train the same numbers, and loading or moving the model needs no re-tying.
// B = batch, T = sequence length, C = d_model, n = ids of one band.
#include <torch/torch.h>

#include <vector>

namespace xtrap {

struct AdaptiveInputImpl : torch::nn::Module {
  AdaptiveInputImpl(int64_t dModel, torch::nn::AdaptiveLogSoftmaxWithLoss softmax);
  torch::Tensor forward(const torch::Tensor& tokens);  // (B, T) ids -> (B, T, C)

  struct Band {
    int64_t start, end;
    torch::Tensor embedding;   // (end - start, C / 4^b), rows of a softmax tensor
    torch::Tensor projection;  // (C / 4^b, C): x = embedding[id - start] @ projection
  };
  std::vector<Band> bands();
  // fairseq's initialisation of the tied tensors: embeddings N(0, width^-1/2), projections
  // Xavier-uniform (the head's cluster rows keep LibTorch's Linear initialisation).
  void initialise();

  torch::nn::Linear shortlistProjection{nullptr};  // band 0's projection, weight (C, C), no bias

 private:
  torch::nn::AdaptiveLogSoftmaxWithLoss softmax_;  // the owner of every tied tensor (not registered here)
};
TORCH_MODULE(AdaptiveInput);

}  // namespace xtrap
