#pragma once
// A training step that never waits for the GPU: the one TrainStep takes (loss, backward,
// clipping, AdamW, the skip of a non-finite step), with every value the host used to read kept on
// the device instead. The learning rate and the injected NaN factor are device tensors filled
// before the step, the clip scale stays a tensor (gradient_clip.h), AdamW reads its learning
// rate and step count from tensors and skips a non-finite step on the device
// (InPlaceAdamW::stepOnDevice), and the loss, the gradient norm and the count of skipped steps
// land in device tensors that the trainer reads every --log-every steps only. The batch is built
// on the host as before and copied into one device buffer of fixed shape, so the step's shapes
// and addresses are the same every time: on a GPU (--cuda-graph auto) it is captured once as a
// CUDA graph and replayed (util/cuda_graph.h), dropout drawing from the CUDA generator the graph
// advances as eager kernels would. Uncaptured (--cuda-graph uncaptured, on any device) it is the
// same step run op by op: the reference the captured one is checked against, and on the CPU what
// the tests train with. Its numbers equal TrainStep's to float rounding (AdamW's scalars are
// float32 tensors here, double there).
// Only where shapes are static and no step needs the host: decoders (an encoder scores a
// different number of masked tokens every step), the full softmax (adaptive softmax and input
// have data-dependent cluster sizes), dense gradients, one process (data-parallel steps all-reduce
// from backward hooks and agree on the loss on the host).
#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "dist/dist_group.h"
#include "model/transformer.h"
#include "run/train_config.h"
#include "train/in_place_adamw.h"
#include "train/objective.h"
#include "util/cuda_graph.h"

namespace xtrap {

class DeviceStep {
 public:
  // Why this run cannot train with the step at all ("" = it can).
  static std::string unsupported(Transformer& model, const DistGroup& group);
  // Why it can, but not captured ("" = it can be captured); the model in training mode.
  static std::string uncapturable(Transformer& model);

  // `optimizer` (TrainStep's) must outlive this; capture: on the model's GPU, as a CUDA graph.
  DeviceStep(Transformer& model, const TrainConfig& t, InPlaceAdamW& optimizer, bool capture);

  // Enqueues one step on `starts` (the whole batch) at learning rate `lr`; reads nothing back.
  void run(TokenSpan stream, const std::vector<int64_t>& starts, double lr, bool injectNan, const TaskRows& tasks);

  struct Reading {
    double loss = 0, gradNorm = 0;  // of the last step
    int64_t badSteps = 0;           // steps skipped since this object was made
  };
  Reading read();  // one host read: waits for the steps enqueued
  bool captured() const { return graph_ && graph_->captured(); }

 private:
  void compute();  // the step on the device, from the buffers below to the ones after them

  Transformer& model_;
  const TrainConfig& t_;
  InPlaceAdamW& optimizer_;
  std::unique_ptr<CudaGraph> graph_;
  // Inputs, filled by run() before each step: (B, L + 1) int64 tokens; 0-dim float32 lr and the
  // loss factor (1, or NaN for an injected non-finite step).
  torch::Tensor batch_, lr_, lossFactor_;
  // Outputs: 0-dim float32 loss and gradient norm of the last step, count of skipped steps.
  torch::Tensor loss_, gradNorm_, badSteps_;
};

}  // namespace xtrap
