#include "train/train_step.h"

#include <cmath>
#include <limits>

#include "train/gradient_clip.h"
#include "util/execution_context.h"
#include "util/interrupt.h"

namespace xtrap {

namespace {

// Weight decay on matrices only (nanoGPT): biases, norms, slopes and scalars are not decayed.
std::unique_ptr<InPlaceAdamW> makeOptimizer(Transformer& model, const TrainConfig& t) {
  std::vector<torch::Tensor> decay, noDecay;
  for (auto& p : model->parameters()) (p.dim() >= 2 ? decay : noDecay).push_back(p);
  auto options = torch::optim::AdamWOptions(t.lr).betas({t.beta1, t.beta2}).weight_decay(t.weightDecay);
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(decay, std::make_unique<torch::optim::AdamWOptions>(options));
  auto noDecayOptions = options;
  noDecayOptions.weight_decay(0.0);
  groups.emplace_back(noDecay, std::make_unique<torch::optim::AdamWOptions>(noDecayOptions));
  return std::make_unique<InPlaceAdamW>(groups, options);
}

void setLearningRate(torch::optim::AdamW& opt, double lr) {
  for (auto& group : opt.param_groups()) static_cast<torch::optim::AdamWOptions&>(group.options()).lr(lr);
}

}  // namespace

TrainStep::TrainStep(Transformer& model, const TrainConfig& t, DistGroup& group, bool forDeviceStep)
    : model_(model),
      t_(t),
      group_(group),
      optimizer_(makeOptimizer(model, t)),
      sync_(group, forDeviceStep ? std::vector<torch::Tensor>{} : model->parameters(),
            model->sparseGradientParameters()) {
  if (!forDeviceStep) optimizer_->shardOver(group);
  optimizer_->allocateState();
}

TrainStep::Outcome TrainStep::run(TokenSpan stream, const std::vector<int64_t>& starts, int64_t step, double lr,
                                  const MlmTokens& mlm, bool injectNan, const TaskRows& tasks) {
  setLearningRate(*optimizer_, lr);
  // This rank's slice of the step's sequences, in t.accumulate micro-batches of `micro` each.
  const int64_t parts = t_.accumulate, localB = static_cast<int64_t>(starts.size()) / group_.world();
  const int64_t micro = localB / parts;
  const uint64_t maskSeed = stepMaskSeed(t_.seed, step);
  // The step's loss is the mean over the scored tokens of all ranks and micro-batches (an
  // encoder's masked counts differ): each micro-batch's mean weighs tokens_part / tokens_all, and
  // the gradients are summed over micro-batches and ranks. The batches are built first (on the
  // host), so that every backward pass knows its weight.
  std::vector<TrainingBatch> batches;
  int64_t rankTokens = 0;
  for (int64_t part = 0; part < parts; ++part) {
    const int64_t first = group_.rank() * localB + part * micro;  // in the step's batch
    BatchRows rows = batchRows(starts, tasks, first, micro);
    batches.push_back(trainingBatch(model_->config, stream, rows.starts, maskSeed, t_.maskProb, mlm, first, rows.tasks,
                                    t_.taskLoss == "answer"));
    rankTokens += batches.back().scored;
  }
  auto total = torch::tensor({double(rankTokens)}, torch::kFloat64);
  group_.allreduceSum(total);  // a no-op in one process
  const double allTokens = total.item<double>();
  // No gradient is held through the forward pass: the last step's are dropped before it, not
  // zeroed after it (their memory, a vocabulary-sized embedding's included, is free for the
  // activations).
  for (auto& p : model_->parameters()) p.mutable_grad() = torch::Tensor();
  sync_.start(parts);
  // A step that scores no token anywhere is non-finite (0 / 0), and skipped.
  torch::Tensor rankLoss = torch::full({}, allTokens > 0 ? 0.0 : std::numeric_limits<double>::quiet_NaN(),
                                       torch::kFloat64);  // 0-dim: this rank's share of the step's loss
  for (const TrainingBatch& batch : batches) {
    if (batch.scored == 0) continue;  // adds nothing
    LossResult r = batchLoss(model_, batch);
    if (injectNan) r.loss = r.loss * std::numeric_limits<double>::quiet_NaN();
    torch::Tensor weighted = r.loss * (double(r.tokens) / allTokens);
    weighted.backward();
    rankLoss = rankLoss + weighted.detach().to(torch::kFloat64);
  }
  sync_.finish();
  // A parameter this step did not reach (an adaptive-softmax cluster no target fell in) gets a
  // zero gradient, as zero_grad() gave it: AdamW still decays it and moves it by its moments.
  for (auto& p : model_->parameters()) {
    if (p.requires_grad() && !p.grad().defined()) p.mutable_grad() = torch::zeros_like(p);
    if (p.grad().defined() && p.grad().is_sparse())
      p.mutable_grad() = p.grad().coalesce();  // one entry per row for the norm
  }
  Outcome out;
  // The step's loss and gradient norm in one host read: on a GPU the step's one synchronisation.
  auto loss = rankLoss.reshape({});
  auto norm = t_.clipNorm > 0 ? clipGradientNorm(model_->parameters(), t_.clipNorm).to(loss.device(), torch::kFloat64)
                              : torch::zeros({}, loss.options());
  const std::vector<double> read = toHostDoubles(torch::stack({loss, norm}));
  out.gradNorm = read[1];
  // Loss summed over ranks, and whether any rank got SIGINT/SIGTERM: all ranks decide alike, on
  // what was summed only. A signal that lands after the sum counts at the next step; read
  // afresh here it would stop this rank one step before the others, which would then wait in a
  // collective for it.
  int localSignal = interruptSignal();
  auto agreed = torch::tensor({read[0], double(localSignal != 0)}, torch::kFloat64);
  group_.allreduceSum(agreed);
  out.loss = agreed[0].item<double>();
  out.stopSignal = agreedStopSignal(localSignal, agreed[1].item<double>() > 0);
  out.bad = !std::isfinite(out.loss) || !std::isfinite(out.gradNorm);
  if (!out.bad) {  // a bad step is skipped; the optimizer state stays clean
    optimizer_->step();
    model_->constrainParameters();
  }
  return out;
}

}  // namespace xtrap
