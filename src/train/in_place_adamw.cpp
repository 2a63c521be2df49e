#include "train/in_place_adamw.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "util/execution_context.h"
#include "util/torch_compat.h"

namespace xtrap {
namespace {

constexpr int64_t kSlice = int64_t(1) << 20;

// The key of a parameter's state in Optimizer::state_: the TensorImpl address printed to a
// string in LibTorch 1.13, the address itself in later versions.
template <class Key>
Key stateKey(const torch::Tensor& p) {
  if constexpr (std::is_same_v<Key, std::string>) {
    std::ostringstream s;
    s << p.unsafeGetTensorImpl();
    return s.str();
  } else {
    return p.unsafeGetTensorImpl();
  }
}

// The parameters of one group that one multi-tensor kernel updates (compat::fusedAdamW): on one
// GPU, float32, dense gradient, moments not sharded. Its temporaries are per block of elements,
// not per parameter, and it is one launch instead of a handful per slice of every parameter.
struct FusedGroup {
  std::vector<torch::Tensor> params, grads, expAvgs, expAvgSqs;
  std::vector<float> steps;

  bool takes(const torch::Tensor& p, bool sparse, bool sharded) const {
    if (!compat::kHasFusedAdamW || !p.is_cuda() || sparse || sharded) return false;
    if (p.scalar_type() != torch::kFloat32 || p.grad().scalar_type() != torch::kFloat32) return false;
    return params.empty() || p.device() == params.front().device();
  }
  void add(const torch::Tensor& p, torch::optim::AdamWParamState& state) {
    params.push_back(p);
    grads.push_back(p.grad().contiguous());
    expAvgs.push_back(state.exp_avg());
    expAvgSqs.push_back(state.exp_avg_sq());
    steps.push_back(float(state.step()));  // exact up to 2^24 steps
  }
  void run(const torch::optim::AdamWOptions& options) const {
    if (params.empty()) return;
    // (n) float32, one copy from pinned memory: a copy from pageable memory would wait for the
    // backward pass still running on the GPU.
    auto onDevice = torch::tensor(steps).pin_memory().to(params.front().device(), /*non_blocking=*/true);
    std::vector<torch::Tensor> stepViews;
    for (int64_t i = 0; i < onDevice.numel(); ++i) stepViews.push_back(onDevice.select(0, i));
    auto [beta1, beta2] = options.betas();
    compat::fusedAdamW(params, grads, expAvgs, expAvgSqs, stepViews, options.lr(), beta1, beta2, options.weight_decay(),
                       options.eps());
  }
};

}  // namespace

void InPlaceAdamW::shardOver(DistGroup& group) { group_ = group.world() > 1 ? &group : nullptr; }

bool InPlaceAdamW::sharded(const torch::Tensor& p) const {
  return group_ && p.dim() >= 1 && p.numel() >= kShardMinElements && p.size(0) >= group_->world();
}

InPlaceAdamW::Rows InPlaceAdamW::rowsOf(const torch::Tensor& p, int rank) const {
  if (!sharded(p)) return {0, p.dim() >= 1 ? p.size(0) : 1};
  int64_t rows = p.size(0), world = group_->world();
  int64_t begin = rows * rank / world;
  return {begin, rows * (rank + 1) / world - begin};
}

torch::optim::AdamWParamState& InPlaceAdamW::stateOf(const torch::Tensor& p) {
  using Key = typename std::decay_t<decltype(state_)>::key_type;
  Key key = stateKey<Key>(p);
  if (state_.find(key) == state_.end()) {
    Rows own = rowsOf(p, group_ ? group_->rank() : 0);
    auto mine = p.dim() >= 1 ? p.narrow(0, own.begin, own.count) : p;
    auto fresh = std::make_unique<torch::optim::AdamWParamState>();
    fresh->step(0);
    fresh->exp_avg(torch::zeros_like(mine, torch::MemoryFormat::Contiguous));
    fresh->exp_avg_sq(torch::zeros_like(mine, torch::MemoryFormat::Contiguous));
    state_[key] = std::move(fresh);
  }
  return static_cast<torch::optim::AdamWParamState&>(*state_[key]);
}

void InPlaceAdamW::allocateState() {
  for (auto& group : param_groups_)
    for (auto& p : group.params())
      if (p.requires_grad()) stateOf(p);
}

torch::Tensor InPlaceAdamW::step(LossClosure closure) {
  torch::NoGradGuard noGrad;
  torch::Tensor loss;
  if (closure) {
    torch::AutoGradMode enableGrad(true);
    loss = closure();
  }
  std::vector<torch::Tensor> updatedShards;  // in the same order on every rank
  for (auto& group : param_groups_) {
    auto& options = static_cast<torch::optim::AdamWOptions&>(group.options());
    if (options.amsgrad()) throw std::invalid_argument("InPlaceAdamW: amsgrad is not supported");
    auto [beta1, beta2] = options.betas();
    FusedGroup fused;
    for (auto& p : group.params()) {
      if (!p.grad().defined()) continue;
      TORCH_CHECK(p.is_contiguous(), "InPlaceAdamW: parameters must be contiguous");
      auto& state = stateOf(p);
      state.step(state.step() + 1);
      if (fused.takes(p, p.grad().is_sparse(), sharded(p))) {
        fused.add(p, state);
        continue;
      }
      double biasCorrection1 = 1 - std::pow(beta1, state.step());
      double biasCorrection2 = 1 - std::pow(beta2, state.step());
      double stepSize = options.lr() / biasCorrection1;
      double decay = 1 - options.lr() * options.weight_decay();
      // This rank's rows: the whole parameter unless it is sharded.
      const bool isSharded = sharded(p);
      const Rows own = rowsOf(p, isSharded ? group_->rank() : 0);
      auto ownRows = [&](const torch::Tensor& t) { return isSharded ? t.narrow(0, own.begin, own.count) : t; };
      if (isSharded) updatedShards.push_back(p);
      // Flat views (N); the same operations as AdamW::step, one slice at a time.
      const bool sparse = p.grad().is_sparse();
      auto param = ownRows(p).view({-1}), grad = sparse ? torch::Tensor() : ownRows(p.grad()).reshape({-1});
      auto expAvg = state.exp_avg().view({-1}), expAvgSq = state.exp_avg_sq().view({-1});
      auto slices = [&](auto&& update) {
        for (int64_t begin = 0, n = param.numel(); begin < n; begin += kSlice) {
          int64_t len = std::min(kSlice, n - begin);
          update(param.narrow(0, begin, len), sparse ? grad : grad.narrow(0, begin, len), expAvg.narrow(0, begin, len),
                 expAvgSq.narrow(0, begin, len));
        }
      };
      auto moveParameter = [&](torch::Tensor pS, const torch::Tensor& mS, const torch::Tensor& vS) {
        auto denom = (vS.sqrt() / std::sqrt(biasCorrection2)).add_(options.eps());
        pS.addcdiv_(mS, denom, -stepSize);
      };
      const bool decays = options.weight_decay() != 0;
      if (!sparse) {
        slices([&](torch::Tensor pS, const torch::Tensor& gS, torch::Tensor mS, torch::Tensor vS) {
          if (decays) pS.mul_(decay);
          mS.mul_(beta1).add_(gS, 1 - beta1);
          vS.mul_(beta2).addcmul_(gS, gS, 1 - beta2);
          moveParameter(pS, mS, vS);
        });
        continue;
      }
      // Sparse: every row decays, the gradient's rows (those among this rank's) get its terms,
      // every row moves.
      slices([&](torch::Tensor pS, const torch::Tensor&, torch::Tensor mS, torch::Tensor vS) {
        if (decays) pS.mul_(decay);
        mS.mul_(beta1);
        vS.mul_(beta2);
      });
      auto g = p.grad().coalesce();
      auto rows = g.indices()[0], values = g.values();  // (n), (n, ...)
      if (isSharded) {
        auto inside = rows.ge(own.begin).logical_and_(rows.lt(own.begin + own.count));  // (n)
        rows = rows.masked_select(inside).sub_(own.begin);
        values = values.index({inside});
      }
      state.exp_avg().index_add_(0, rows, values, 1 - beta1);
      state.exp_avg_sq().index_add_(0, rows, values * values, 1 - beta2);
      slices([&](torch::Tensor pS, const torch::Tensor&, torch::Tensor mS, torch::Tensor vS) {
        moveParameter(pS, mS, vS);
      });
    }
    fused.run(options);
  }
  // Every rank's rows into every rank's copy, in place.
  for (auto& p : updatedShards)
    for (int rank = 0; rank < group_->world(); ++rank) {
      Rows rows = rowsOf(p, rank);
      auto block = p.detach().narrow(0, rows.begin, rows.count);
      group_->broadcast(block, rank);
    }
  return loss;
}

void InPlaceAdamW::stepOnDevice(const torch::Tensor& lr, const torch::Tensor& skip) {
  torch::NoGradGuard noGrad;
  if (!deviceStepCount_.defined()) {
    std::optional<int64_t> count;
    for (auto& group : param_groups_)
      for (auto& p : group.params()) {
        if (!p.requires_grad()) continue;
        int64_t s = stateOf(p).step();
        TORCH_CHECK(!count || *count == s, "InPlaceAdamW::stepOnDevice: parameters at different step counts");
        count = s;
      }
    deviceStepCount_ = torch::full({}, double(count.value_or(0)), skip.options());
  }
  deviceStepCount_.add_(1 - skip);  // unchanged by a skipped step
  const auto keep = skip.logical_not();
  for (auto& group : param_groups_) {
    auto& options = static_cast<torch::optim::AdamWOptions&>(group.options());
    if (options.amsgrad()) throw std::invalid_argument("InPlaceAdamW: amsgrad is not supported");
    auto [beta1, beta2] = options.betas();
    std::vector<torch::Tensor> params, grads, expAvgs, expAvgSqs;
    for (auto& p : group.params()) {
      if (!p.grad().defined()) continue;
      TORCH_CHECK(!p.grad().is_sparse() && !sharded(p),
                  "InPlaceAdamW::stepOnDevice: sparse gradients and sharded moments need step()");
      auto& state = stateOf(p);
      params.push_back(p);
      grads.push_back(p.grad());
      expAvgs.push_back(state.exp_avg());
      expAvgSqs.push_back(state.exp_avg_sq());
    }
    if (params.empty()) continue;
    const bool fused = compat::kHasFusedAdamWTensorLr && params.front().is_cuda() &&
                       std::all_of(params.begin(), params.end(), [](const torch::Tensor& p) {
                         return p.scalar_type() == torch::kFloat32 && p.grad().scalar_type() == torch::kFloat32;
                       });
    if (fused) {
      std::vector<torch::Tensor> steps(params.size(), deviceStepCount_);  // read, not written, by the kernel
      compat::fusedAdamW(params, grads, expAvgs, expAvgSqs, steps, lr, beta1, beta2, options.weight_decay(),
                         options.eps(), skip);
      continue;
    }
    // step()'s formula with tensor scalars; a skipped step keeps the old values (the new ones may be NaN).
    auto biasCorrection1 = 1 - torch::pow(beta1, deviceStepCount_);
    auto biasCorrection2 = 1 - torch::pow(beta2, deviceStepCount_);
    auto stepSize = lr / biasCorrection1;
    auto decay = 1 - lr * options.weight_decay();
    for (size_t i = 0; i < params.size(); ++i) {
      auto m = expAvgs[i] * beta1 + grads[i] * (1 - beta1);
      auto v = expAvgSqs[i] * beta2 + grads[i] * grads[i] * (1 - beta2);
      auto denom = v.sqrt() / biasCorrection2.sqrt() + options.eps();
      auto moved = params[i] * decay - stepSize * m / denom;
      params[i].copy_(torch::where(keep, moved, params[i]));
      expAvgs[i].copy_(torch::where(keep, m, expAvgs[i]));
      expAvgSqs[i].copy_(torch::where(keep, v, expAvgSqs[i]));
    }
  }
}

void InPlaceAdamW::storeDeviceStepCount() {
  if (!deviceStepCount_.defined()) return;
  auto count = static_cast<int64_t>(toHostDoubles(deviceStepCount_)[0]);
  for (auto& group : param_groups_)
    for (auto& p : group.params())
      if (p.requires_grad()) stateOf(p).step(count);
}

void InPlaceAdamW::gatherStateToRoot() {
  if (!group_) return;
  torch::NoGradGuard noGrad;
  for (auto& group : param_groups_)
    for (auto& p : group.params()) {
      if (!p.requires_grad() || !sharded(p)) continue;
      auto& state = stateOf(p);
      if (!group_->isRoot()) {
        group_->send(state.exp_avg(), 0);
        group_->send(state.exp_avg_sq(), 0);
        continue;
      }
      auto whole = [&](const torch::Tensor& mine) {
        auto all = torch::empty_like(p, torch::MemoryFormat::Contiguous);
        for (int rank = 0; rank < group_->world(); ++rank) {
          Rows rows = rowsOf(p, rank);
          auto block = all.narrow(0, rows.begin, rows.count);
          if (rank == 0)
            block.copy_(mine);
          else
            group_->receive(block, rank);
        }
        return all;
      };
      state.exp_avg(whole(state.exp_avg()));
      state.exp_avg_sq(whole(state.exp_avg_sq()));
    }
}

void InPlaceAdamW::keepOwnRows() {
  if (!group_) return;
  for (auto& group : param_groups_)
    for (auto& p : group.params()) {
      if (!p.requires_grad() || !sharded(p)) continue;
      auto& state = stateOf(p);
      if (state.exp_avg().size(0) != p.size(0)) continue;  // already this rank's rows
      Rows own = rowsOf(p, group_->rank());
      state.exp_avg(state.exp_avg().narrow(0, own.begin, own.count).clone());
      state.exp_avg_sq(state.exp_avg_sq().narrow(0, own.begin, own.count).clone());
    }
}

int64_t InPlaceAdamW::stateBytes() {
  int64_t bytes = 0;
  for (auto& group : param_groups_)
    for (auto& p : group.params()) {
      if (!p.requires_grad()) continue;
      auto& state = stateOf(p);
      bytes += int64_t(state.exp_avg().nbytes() + state.exp_avg_sq().nbytes());
    }
  return bytes;
}

}  // namespace xtrap
