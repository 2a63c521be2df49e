#include "train/device_step.h"

#include <limits>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include "train/gradient_clip.h"
#include "util/execution_context.h"
#include "util/interrupt.h"
#include "util/torch_compat.h"

namespace xtrap {

std::string DeviceStep::unsupported(Transformer& model, const TrainConfig& t) {
  const ModelConfig& c = model->config;
  if (!c.causal()) return "an encoder scores a different number of masked tokens every step (a dynamic shape)";
  if (t.taskLoss == "answer") return "--task-loss answer scores a different number of targets every step";
  if (!c.adaptiveSoftmaxCutoffs.empty())
    return "the adaptive softmax sends a data-dependent number of tokens to each cluster (dynamic shapes)";
  if (!model->sparseGradientParameters().empty()) return "sparse embedding gradients change shape every step";
  return "";
}

std::string DeviceStep::uncapturable(Transformer& model) {
  if (!model->device().is_cuda()) return "the CPU has no CUDA graphs";
  if (!CudaGraph::available()) return "this LibTorch has no CUDA graphs";
  if (!compat::kHasFusedAdamWTensorLr)
    return "LibTorch " TORCH_VERSION " has no fused AdamW with a tensor learning rate (2.2+)";
  return "";
}

DeviceStep::DeviceStep(Transformer& model, const TrainConfig& t, InPlaceAdamW& optimizer, DistGroup& group,
                       bool capture, GraphAllreduce allreduce)
    : model_(model), t_(t), optimizer_(optimizer), group_(group) {
  auto floats = torch::TensorOptions().dtype(torch::kFloat32).device(model->device());
  lr_ = torch::zeros({}, floats);
  lossFactor_ = torch::ones({}, floats);
  loss_ = torch::zeros({}, floats);
  gradNorm_ = torch::zeros({}, floats);
  badSteps_ = torch::zeros({}, floats);
  int64_t elements = 0;
  for (auto& p : model->parameters())
    if (p.requires_grad()) {
      params_.push_back(p);
      elements += p.numel();
    }
  if (group.active()) sums_ = torch::zeros({elements + 1}, floats);
  if (!capture) return;
  if (sums_.defined() && allreduce == GraphAllreduce::Outside) {
    graph_ = std::make_unique<CudaGraph>(model->device(), [this] { backward(); });
    updateGraph_ = std::make_unique<CudaGraph>(model->device(), [this] { update(); });
  } else {
    graph_ = std::make_unique<CudaGraph>(model->device(), [this] {
      backward();
      this->allreduce();
      update();
    });
  }
}

void DeviceStep::run(TokenSpan stream, const std::vector<int64_t>& starts, double lr, bool injectNan,
                     const TaskRows& tasks) {
  // This rank's B / world rows, as TrainStep takes them.
  const int64_t localB = static_cast<int64_t>(starts.size()) / group_.world();
  BatchRows mine = batchRows(starts, tasks, group_.rank() * localB, localB);
  auto batch = decoderTrainingBatch(model_->config, stream, mine.starts, mine.tasks);  // (B / world, L + 1) on the host
  if (!batch_.defined()) batch_ = torch::empty_like(batch, batch.options().device(model_->device()));
  // From pinned memory a GPU copies without making the host wait for the step before.
  batch_.copy_(batch_.is_cuda() ? batch.pin_memory() : batch, /*non_blocking=*/true);
  lr_.fill_(lr);
  // Every micro-batch of every rank scores the same number of tokens, 1 / (world accumulate) of
  // the step's: the sum of the weighted losses is the step's mean, that of their gradients its
  // gradient.
  lossFactor_.fill_(injectNan ? std::numeric_limits<double>::quiet_NaN()
                              : 1.0 / double(group_.world() * t_.accumulate));
  if (updateGraph_) {
    graph_->run();
    allreduce();
    updateGraph_->run();
  } else if (graph_) {
    graph_->run();
  } else {
    backward();
    allreduce();
    update();
  }
}

void DeviceStep::backward() {
  // As TrainStep: the last step's gradients are dropped, not zeroed (captured, the backward
  // then makes them in the graph's pool, at the addresses every replay writes).
  for (auto& p : model_->parameters()) p.mutable_grad() = torch::Tensor();
  // t.accumulate micro-batches of batch_'s rows, one forward and backward each, their gradients
  // adding up in the parameters'.
  const int64_t micro = batch_.size(0) / t_.accumulate;
  for (int64_t part = 0; part < t_.accumulate; ++part) {
    torch::Tensor loss = decoderLoss(model_, batch_.narrow(0, part * micro, micro)).loss * lossFactor_;  // 0-dim
    loss.backward();
    stepLoss_ = part == 0 ? loss.detach() : stepLoss_ + loss.detach();
  }
  for (auto& p : params_)
    if (!p.grad().defined()) p.mutable_grad() = torch::zeros_like(p);
  torch::NoGradGuard noGrad;
  if (!sums_.defined()) return;
  std::vector<torch::Tensor> pieces;
  for (auto& p : params_) pieces.push_back(p.grad().reshape({-1}));
  pieces.push_back(stepLoss_.reshape({1}));
  torch::cat_out(sums_, pieces);
}

void DeviceStep::allreduce() {
  if (sums_.defined()) group_.wait(group_.allreduceAsync(sums_));
}

void DeviceStep::update() {
  torch::NoGradGuard noGrad;
  if (sums_.defined()) {  // the summed gradients and loss, in place of this rank's
    int64_t offset = 0;
    for (auto& p : params_) {
      p.mutable_grad() = sums_.narrow(0, offset, p.numel()).view_as(p);
      offset += p.numel();
    }
    stepLoss_ = sums_[offset];
  }
  auto norm = t_.clipNorm > 0 ? clipGradientNorm(model_->parameters(), t_.clipNorm).to(torch::kFloat32)
                              : torch::zeros({}, stepLoss_.options());
  auto skip = torch::isfinite(stepLoss_).logical_and(torch::isfinite(norm)).logical_not().to(torch::kFloat32);
  optimizer_.stepOnDevice(lr_, skip);
  model_->constrainParameters();  // clamps: a skipped step's unchanged parameters stay as they are
  loss_.copy_(stepLoss_);
  gradNorm_.copy_(norm);
  badSteps_.add_(skip);
}

DeviceStep::Reading DeviceStep::read() {
  const std::vector<double> values = toHostDoubles(torch::stack({loss_, gradNorm_, badSteps_}));
  Reading r{values[0], values[1], static_cast<int64_t>(values[2])};
  // The ranks agree at the reads, which they all make at the same steps: a signal that lands
  // between two reads stops every rank at the second.
  const int local = interruptSignal();
  auto any = torch::tensor({double(local != 0)}, torch::kFloat64);
  group_.allreduceSum(any);  // a no-op in one process
  r.stopSignal = agreedStopSignal(local, any.item<double>() > 0);
  return r;
}

}  // namespace xtrap
