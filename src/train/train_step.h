#pragma once
// One optimizer step of this rank, on the device the model was placed on: the loss of its slice
// of the global batch (the model moves the batch and computes in its precision), backward with
// the gradient all-reduce overlapping it, clipping, and the update unless the loss summed over
// ranks or the gradient is not finite.
#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "data/mlm_masking.h"
#include "dist/dist_group.h"
#include "dist/gradient_sync.h"
#include "model/transformer.h"
#include "run/train_config.h"
#include "train/in_place_adamw.h"
#include "train/objective.h"

namespace xtrap {

class TrainStep {
 public:
  // Its optimizer: AdamW with weight decay on matrices only, its moments sharded over the group.
  // forDeviceStep: the steps will be a DeviceStep's (train/device_step.h), which all-reduces its
  // gradients itself and updates whole moments: no gradient hooks, no sharding, and run() unused.
  TrainStep(Transformer& model, const TrainConfig& t, DistGroup& group, bool forDeviceStep = false);

  struct Outcome {
    double loss = 0, gradNorm = 0;
    bool bad = false;    // skipped: non-finite loss or gradient
    int stopSignal = 0;  // SIGINT/SIGTERM seen by any rank (all ranks agree)
  };

  // tasks: empty, or the global batch's task rows (objective.h), one per start.
  Outcome run(TokenSpan stream, const std::vector<int64_t>& starts, int64_t step, double lr, const MlmTokens& mlm,
              bool injectNan, const TaskRows& tasks);

  InPlaceAdamW& optimizer() { return *optimizer_; }
  const GradientSync& gradientSync() const { return sync_; }

 private:
  Transformer& model_;
  const TrainConfig& t_;
  DistGroup& group_;
  std::unique_ptr<InPlaceAdamW> optimizer_;
  GradientSync sync_;
};

}  // namespace xtrap
