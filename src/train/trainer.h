#pragma once
// Training loop: AdamW (weight decay on matrices only), warmup + cosine / inverse-sqrt, gradient
// clipping, a progress bar, train.jsonl every logEvery steps, validation loss at L every
// evalEvery steps, atomic checkpoints every checkpointEvery steps and at the end.
// Steps with a non-finite loss or gradient are skipped and counted; at maxBadSteps the run stops
// (throws) keeping its last good checkpoint. SIGINT/SIGTERM (util/interrupt.h) checkpoint the
// current step and throw Interrupted. A resumed run is bit-identical to an uninterrupted one on
// CPU with fixed threads: the checkpoint holds model, AdamW, step, data order and RNG state.
// Under the torchrun environment (dist/dist_env.h) it trains data-parallel: every rank draws the
// same global batch from the one data-order stream and trains on its B / world share; gradients
// are summed over ranks with the loss weighted so the step equals a single process's on the whole
// batch; rank 0 alone writes the run directory. The checkpoint is independent of the world size,
// so --resume works with any number of ranks, and on any device: the model is placed on the
// run's device (TrainConfig::device, auto resolved) before the optimizer sees it, computes in its
// dtype under autocast, and the checkpoint loads onto it.
// With a DeviceStep (--cuda-graph) the host reads loss, gradient norm and the count of skipped steps
// only when a train.jsonl line, an evaluation, a checkpoint or the end is due: a skipped step is
// counted in the next such line, and --max-bad-steps stops the run there.
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "run/run_directory.h"

namespace xtrap {

// The values of TrainRequest::cudaGraph (--cuda-graph).
inline const std::vector<std::string> kCudaGraphModes = {"auto", "off", "uncaptured"};
// The values of TrainRequest::graphAllreduce (--graph-allreduce).
inline const std::vector<std::string> kGraphAllreduceModes = {"outside", "inside"};

struct TrainRequest {
  ModelConfig model;
  TrainConfig train;
  std::filesystem::path runDir;
  bool resume = false;       // continue runDir from its checkpoint with its run.json configs
  std::string resumeDevice;  // resume: non-empty = continue on this device (auto | cpu | cuda)
  bool progress = true;      // draw the progress bar
  // false: the model's elementwise passes as LibTorch's operators where the fused CUDA kernels
  // would run (TransformerImpl::setFusedElementwise; train --unfused-elementwise).
  bool fusedElementwise = true;
  // Use the quickstart's adaptive softmax (cutoffs 2000, 10000, those below the vocabulary size)
  // unless model.adaptiveSoftmaxCutoffs was given.
  bool defaultAdaptiveSoftmax = false;
  // How each step runs (--cuda-graph): auto = captured as a CUDA graph where the device and the
  // model allow it (train/device_step.h), else TrainStep, saying once on a GPU why; off = TrainStep
  // (loss and gradient norm read on the host every step); uncaptured = DeviceStep op by op (an
  // error where it does not apply).
  std::string cudaGraph = "auto";
  // Where a captured data-parallel step all-reduces its gradients (--graph-allreduce, a
  // kGraphAllreduceModes name): inside its one graph, or outside, between the graph of its forward
  // and backward and that of its update (GraphAllreduce).
  std::string graphAllreduce = "outside";
  // Test hook: steps (1-based) whose loss is replaced by NaN, to exercise the non-finite guard.
  std::set<int64_t> injectNanAtSteps;
};

// Returns the finished run's info (run.json as written at the end).
RunInfo trainRun(TrainRequest request);

}  // namespace xtrap
