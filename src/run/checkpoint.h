#pragma once
// checkpoint.pt: model parameters and buffers, the model's configuration, AdamW state, step,
// data-order and RNG states, in one LibTorch archive inside the checksummed container of checkpoint_file.h, written to
// a temporary name and renamed (the previous checkpoint stays valid until the new one is complete).
#include <torch/torch.h>

#include <filesystem>
#include <string>

#include "model/transformer.h"

namespace xtrap {

struct TrainingState {
  int64_t step = 0;  // optimizer steps done
  int64_t tokensSeen = 0;
  int64_t badSteps = 0;         // skipped non-finite steps
  std::string samplerState;     // BlockSampler::state()
  torch::Tensor torchRngState;  // default CPU generator (dropout, masking)
  torch::Tensor cudaRngState;   // the training device's CUDA generator (dropout on a GPU), if any
};

void saveCheckpoint(const std::filesystem::path& file, Transformer& model, torch::optim::Optimizer* optimizer,
                    const TrainingState& state);
// Loads into an already-built model (and optimizer, if given) on the model's device, wherever the
// checkpoint was written; throws a one-line error naming the file when it is missing, truncated,
// foreign or does not match the model. The model is the one the run.json beside the checkpoint
// describes: a checkpoint whose stored configuration differs from it (copied from another run,
// an edited run.json), or any of whose tensors has another shape, is rejected naming run.json
// and the differing setting or tensor; older checkpoints without a stored configuration get
// the shape check alone.
TrainingState loadCheckpoint(const std::filesystem::path& file, Transformer& model, torch::optim::Optimizer* optimizer);

}  // namespace xtrap

namespace xtrap {
struct RunInfo;
// Builds the run's model from its run.json, places it on `ctx` and loads its checkpoint's
// weights there (eval mode).
Transformer loadTrainedModel(const RunInfo& run, const ExecutionContext& ctx = {});
}  // namespace xtrap
