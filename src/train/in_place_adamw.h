#pragma once
// AdamW whose update allocates no parameter-sized temporaries, and whose moments can be sharded
// over data-parallel ranks.
// LibTorch's AdamW::step computes the denominator as (sqrt(v) / sqrt(bc2)) + eps over the whole
// parameter: two temporaries the size of the parameter. For the token embedding of a
// WikiText-103 vocabulary (267,735 x 128 floats, 131 MiB) that is 262 MiB on top of the
// parameter, its gradient and both moments at the moment of the step, the peak of a training
// step. This subclass runs LibTorch's formula, element for element, over slices of 2^20
// elements; its state (step, exp_avg, exp_avg_sq per parameter) is AdamW's own, so checkpoints
// save and load as before. AMSGrad is not used by xtrap and is rejected.
// On a GPU (LibTorch 2.1+) the float32 parameters with a dense gradient and unsharded moments of
// a group take one multi-tensor kernel instead, PyTorch's AdamW(fused=True) (the same formula,
// util/torch_compat.h): a handful of launches per slice of every parameter were a step's tail.
// A sparse gradient (an untied embedding's) is the dense gradient that is zero off its rows: the
// moments of every row decay and every row moves, as with the dense gradient (not "lazy" Adam,
// which would update the gradient's rows only); only the gradient's own adds touch rows.
//
// Sharded moments (ZeRO stage 1, Rajbhandari et al. 2020): every rank holds the whole gradient
// (summed by GradientSync) and the whole parameter, but the moments of a large parameter only
// for its own contiguous block of rows (rank r of W: rows [r R / W, (r + 1) R / W)); each rank
// updates its rows and broadcasts them into the others' copies. The update of every element is
// the one of the unsharded step, so W ranks compute what one does. Without it, every rank of a
// job on one machine holds the same moments: 262 MiB each for the embedding above.
#include <torch/torch.h>

#include <unordered_map>

#include "dist/dist_group.h"

namespace xtrap {

class InPlaceAdamW : public torch::optim::AdamW {
 public:
  using torch::optim::AdamW::AdamW;
  torch::Tensor step(LossClosure closure = nullptr) override;
  // The update of a training step that reads nothing on the host (train/device_step.h): the
  // learning rate from `lr`, and from `skip` whether to leave parameters, moments and the step
  // count as they are (a non-finite loss or gradient); both 0-dim float32 on the parameters'
  // device, skip 0 or 1. The step count is one device counter (every parameter steps at every
  // step), started from the optimizer state's; storeDeviceStepCount() writes it back. Dense
  // gradients, unsharded moments, one device. On a GPU with LibTorch 2.2+ each group is PyTorch's
  // fused kernel (compat::fusedAdamW with a tensor lr and found_inf); elsewhere the same formula in
  // float32 tensor operations, which agree with step() to float rounding (its scalars are double).
  void stepOnDevice(const torch::Tensor& lr, const torch::Tensor& skip);
  // The device step count into every parameter's state (before a checkpoint saves it): a host read.
  void storeDeviceStepCount();

  // From here on the moments of every parameter of at least kShardMinElements elements (with at
  // least as many rows as ranks) are sharded over `group`'s ranks; a group of one rank changes
  // nothing. Call before allocateState and before loading a checkpoint; `group` must outlive this.
  void shardOver(DistGroup& group);
  // The moments of every trainable parameter (this rank's rows of a sharded one), zero, now
  // rather than at its first update: made before the first forward pass, these large, long-lived
  // tensors sit below the activations in the heap instead of on top of the holes the first
  // step's activations leave.
  void allocateState();
  // Collective. Rank 0's state becomes every parameter's whole moments (what a checkpoint saves,
  // so it loads with any number of ranks); the other ranks send theirs and keep them.
  void gatherStateToRoot();
  // Whole moments (loaded from a checkpoint, or gathered for one) are cut back to this rank's rows.
  void keepOwnRows();
  // Bytes of moments this rank holds.
  int64_t stateBytes();

  static constexpr int64_t kShardMinElements = int64_t(1) << 16;

 private:
  struct Rows {
    int64_t begin = 0, count = 0;
  };
  torch::optim::AdamWParamState& stateOf(const torch::Tensor& p);  // made on first use
  // Rank `rank`'s rows of a sharded parameter.
  Rows rowsOf(const torch::Tensor& p, int rank) const;
  bool sharded(const torch::Tensor& p) const;

  DistGroup* group_ = nullptr;
  torch::Tensor deviceStepCount_;  // stepOnDevice's step count: 0-dim float32 (exact to 2^24)
};

}  // namespace xtrap
