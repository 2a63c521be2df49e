#pragma once
// AdamW whose update allocates no parameter-sized temporaries.
// LibTorch's AdamW::step computes the denominator as (sqrt(v) / sqrt(bc2)) + eps over the whole
// parameter: two temporaries the size of the parameter. For the token embedding of a
// WikiText-103 vocabulary (267,735 x 128 floats, 131 MiB) that is 262 MiB on top of the
// parameter, its gradient and both moments at the moment of the step, the peak of a training
// step. This subclass runs LibTorch's formula, element for element, over slices of 2^20
// elements; its state (step, exp_avg, exp_avg_sq per parameter) is AdamW's own, so checkpoints
// save and load as before. AMSGrad is not used by xtrap and is rejected.
// A sparse gradient (an untied embedding's) is the dense gradient that is zero off its rows: the
// moments of every row decay and every row moves, as with the dense gradient (not "lazy" Adam,
// which would update the gradient's rows only); only the gradient's own adds touch rows.
#include <torch/torch.h>

namespace xtrap {

class InPlaceAdamW : public torch::optim::AdamW {
 public:
  using torch::optim::AdamW::AdamW;
  torch::Tensor step(LossClosure closure = nullptr) override;
  // The moments of every trainable parameter, zero, now rather than at its first update: made
  // before the first forward pass, these large, long-lived tensors sit below the activations in
  // the heap instead of on top of the holes the first step's activations leave.
  void allocateState();

 private:
  torch::optim::AdamWParamState& stateOf(const torch::Tensor& p);  // made on first use
};

}  // namespace xtrap
