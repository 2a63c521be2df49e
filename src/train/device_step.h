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
// have data-dependent cluster sizes), dense gradients.
// With --accumulate N the batch's rows go through forward and backward in N micro-batches, each
// loss weighted by 1 / N (a decoder's micro-batches score equal token counts), the gradients
// adding up in the parameters'.
// Data parallel (a torchrun job): every rank computes the loss of its B / world rows weighted by
// 1 / world (a decoder's ranks score equal token counts), packs its gradients and that loss into
// one flat float32 buffer, and one all-reduce sums it, after which the gradients are views of the
// sums and the loss is the step's: every rank then clips and skips alike. The ranks agree on a
// SIGINT/SIGTERM at each read (every --log-every steps), not every step. Captured, the all-reduce
// is either inside the one graph (NCCL's kernels captured with the step's) or between two graphs,
// the forward and backward and then the update, issued eagerly (GraphAllreduce). AdamW's moments
// are whole on every rank (ZeRO-1's sharded update would need broadcasts after the step).
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

// Where a captured data-parallel step all-reduces its gradients (--graph-allreduce).
enum class GraphAllreduce {
  Inside,   // in the one graph of the step
  Outside,  // between a graph of the forward and backward and a graph of the update, eagerly
};

class DeviceStep {
 public:
  // Why this run cannot train with the step at all ("" = it can).
  static std::string unsupported(Transformer& model, const TrainConfig& t);
  // Why it can, but not captured ("" = it can be captured).
  static std::string uncapturable(Transformer& model);

  // `optimizer` (TrainStep's, its moments not sharded) and `group` must outlive this; capture: on
  // the model's GPU, as CUDA graphs, the all-reduce of a data-parallel job where `allreduce` says
  // (a job of one process has none).
  DeviceStep(Transformer& model, const TrainConfig& t, InPlaceAdamW& optimizer, DistGroup& group, bool capture,
             GraphAllreduce allreduce = GraphAllreduce::Outside);

  // Enqueues one step on `starts` (the whole batch) at learning rate `lr`; reads nothing back.
  void run(TokenSpan stream, const std::vector<int64_t>& starts, double lr, bool injectNan, const TaskRows& tasks);

  struct Reading {
    double loss = 0, gradNorm = 0;  // of the last step (the sum over ranks)
    int64_t badSteps = 0;           // steps skipped since this object was made
    int stopSignal = 0;             // SIGINT/SIGTERM seen by any rank (all ranks agree)
  };
  // One host read: waits for the steps enqueued. Collective in a data-parallel job (every rank
  // reads at the same steps).
  Reading read();
  bool captured() const { return graph_ && graph_->captured(); }
  // All-reduces per step: 1 in a data-parallel job (one buffer), else 0.
  int64_t allreduces() const { return group_.active() ? 1 : 0; }

 private:
  void backward();   // loss and gradients from batch_; in a data-parallel job packed into sums_
  void allreduce();  // sums_ over the ranks (nothing in one process)
  void update();     // clipping, AdamW and the counters, from the gradients (sums_'s views)

  Transformer& model_;
  const TrainConfig& t_;
  InPlaceAdamW& optimizer_;
  DistGroup& group_;
  // Captured: the whole step, or (GraphAllreduce::Outside in a data-parallel job) its forward and
  // backward, with updateGraph_ the update.
  std::unique_ptr<CudaGraph> graph_, updateGraph_;
  std::vector<torch::Tensor> params_;  // those with gradients, in packing order
  // Inputs, filled by run() before each step: (B / world, L + 1) int64 tokens; 0-dim float32 lr
  // and the loss factor (1 / world, or NaN for an injected non-finite step).
  torch::Tensor batch_, lr_, lossFactor_;
  torch::Tensor stepLoss_;  // 0-dim float32: this rank's weighted loss, then the step's
  // Data parallel: (sum of the gradients' numel + 1) float32, the gradients then the loss.
  torch::Tensor sums_;
  // Outputs: 0-dim float32 loss and gradient norm of the last step, count of skipped steps.
  torch::Tensor loss_, gradNorm_, badSteps_;
};

}  // namespace xtrap
