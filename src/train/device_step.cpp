#include "train/device_step.h"

#include <limits>

#include "train/gradient_clip.h"
#include "util/execution_context.h"
#include "util/torch_compat.h"

namespace xtrap {

std::string DeviceStep::unsupported(Transformer& model, const DistGroup& group) {
  const ModelConfig& c = model->config;
  if (!c.causal()) return "an encoder scores a different number of masked tokens every step (a dynamic shape)";
  if (!c.adaptiveSoftmaxCutoffs.empty())
    return "the adaptive softmax sends a data-dependent number of tokens to each cluster (dynamic shapes)";
  if (!model->sparseGradientParameters().empty()) return "sparse embedding gradients change shape every step";
  if (group.active())  // a torchrun job, one rank included: its gradient hooks all-reduce
    return "data-parallel steps all-reduce from backward hooks and agree on the loss on the host every step";
  return "";
}

std::string DeviceStep::uncapturable(Transformer& model) {
  if (!model->device().is_cuda()) return "the CPU has no CUDA graphs";
  if (!CudaGraph::available()) return "this LibTorch has no CUDA graphs";
  if (!compat::kHasFusedAdamWTensorLr)
    return "LibTorch " TORCH_VERSION " has no fused AdamW with a tensor learning rate (2.2+)";
  return "";
}

DeviceStep::DeviceStep(Transformer& model, const TrainConfig& t, InPlaceAdamW& optimizer, bool capture)
    : model_(model), t_(t), optimizer_(optimizer) {
  auto floats = torch::TensorOptions().dtype(torch::kFloat32).device(model->device());
  lr_ = torch::zeros({}, floats);
  lossFactor_ = torch::ones({}, floats);
  loss_ = torch::zeros({}, floats);
  gradNorm_ = torch::zeros({}, floats);
  badSteps_ = torch::zeros({}, floats);
  if (capture) graph_ = std::make_unique<CudaGraph>(model->device(), [this] { compute(); });
}

void DeviceStep::run(TokenSpan stream, const std::vector<int64_t>& starts, double lr, bool injectNan,
                     const TaskRows& tasks) {
  auto batch = decoderTrainingBatch(model_->config, stream, starts, tasks);  // (B, L + 1) on the host
  if (!batch_.defined()) batch_ = torch::empty_like(batch, batch.options().device(model_->device()));
  // From pinned memory a GPU copies without making the host wait for the step before.
  batch_.copy_(batch_.is_cuda() ? batch.pin_memory() : batch, /*non_blocking=*/true);
  lr_.fill_(lr);
  lossFactor_.fill_(injectNan ? std::numeric_limits<double>::quiet_NaN() : 1.0);
  if (graph_)
    graph_->run();
  else
    compute();
}

void DeviceStep::compute() {
  // As TrainStep: the last step's gradients are dropped, not zeroed (captured, the backward
  // then makes them in the graph's pool, at the addresses every replay writes).
  for (auto& p : model_->parameters()) p.mutable_grad() = torch::Tensor();
  torch::Tensor loss = decoderLoss(model_, batch_).loss * lossFactor_;  // 0-dim float32
  loss.backward();
  for (auto& p : model_->parameters())
    if (p.requires_grad() && !p.grad().defined()) p.mutable_grad() = torch::zeros_like(p);
  torch::NoGradGuard noGrad;
  loss = loss.detach();
  auto norm = t_.clipNorm > 0 ? clipGradientNorm(model_->parameters(), t_.clipNorm).to(torch::kFloat32)
                              : torch::zeros({}, loss.options());
  auto skip = torch::isfinite(loss).logical_and(torch::isfinite(norm)).logical_not().to(torch::kFloat32);
  optimizer_.stepOnDevice(lr_, skip);
  model_->constrainParameters();  // clamps: a skipped step's unchanged parameters stay as they are
  loss_.copy_(loss);
  gradNorm_.copy_(norm);
  badSteps_.add_(skip);
}

DeviceStep::Reading DeviceStep::read() {
  const std::vector<double> values = toHostDoubles(torch::stack({loss_, gradNorm_, badSteps_}));
  return {values[0], values[1], static_cast<int64_t>(values[2])};
}

}  // namespace xtrap
