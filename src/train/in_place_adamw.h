#pragma once
// AdamW whose update allocates no parameter-sized temporaries.
// LibTorch's AdamW::step computes the denominator as (sqrt(v) / sqrt(bc2)) + eps over the whole
// parameter: two temporaries the size of the parameter. For the token embedding of a
// WikiText-103 vocabulary (267,735 x 128 floats, 131 MiB) that is 262 MiB on top of the
// parameter, its gradient and both moments at the moment of the step, the peak of a training
// step. This subclass runs LibTorch's formula, element for element, over slices of 2^20
// elements; its state (step, exp_avg, exp_avg_sq per parameter) is AdamW's own, so checkpoints
// save and load as before. AMSGrad is not used by xtrap and is rejected.
#include <torch/torch.h>

namespace xtrap {

class InPlaceAdamW : public torch::optim::AdamW {
 public:
  using torch::optim::AdamW::AdamW;
  torch::Tensor step(LossClosure closure = nullptr) override;
};

}  // namespace xtrap
