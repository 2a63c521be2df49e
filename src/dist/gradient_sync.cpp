#include "dist/gradient_sync.h"

namespace xtrap {

GradientSync::GradientSync(DistGroup& group, std::vector<torch::Tensor> params,
                           const std::vector<torch::Tensor>& sparse, int64_t bucketBytes)
    : group_(group), params_(std::move(params)) {
  if (!group_.active()) return;
  bucketOf_.resize(params_.size());
  slotOf_.resize(params_.size());
  produced_.assign(params_.size(), 0);
  sparse_.assign(params_.size(), 0);
  sparseGrads_.resize(params_.size());
  for (size_t k = 0; k < params_.size(); ++k)
    for (const auto& s : sparse) sparse_[k] |= params_[k].is_same(s);
  // Reverse order: the last layers' gradients come first in backward. One dtype per bucket.
  int64_t bytes = 0;
  for (size_t k = params_.size(); k-- > 0;) {
    const torch::Tensor& p = params_[k];
    if (!p.requires_grad() || sparse_[k]) continue;
    if (buckets_.empty() || bytes + int64_t(p.nbytes()) > bucketBytes ||
        params_[buckets_.back().params.front()].dtype() != p.dtype()) {
      buckets_.emplace_back();
      bytes = 0;
    }
    Bucket& b = buckets_.back();
    bucketOf_[k] = buckets_.size() - 1;
    slotOf_[k] = b.params.size();
    b.offsets.push_back(b.params.empty() ? 0 : b.offsets.back() + params_[b.params.back()].numel());
    b.params.push_back(k);
    bytes += int64_t(p.nbytes());
  }
  for (Bucket& b : buckets_) {
    const torch::Tensor& last = params_[b.params.back()];
    b.flat = torch::zeros({b.offsets.back() + last.numel()}, last.options().requires_grad(false));
  }
  for (size_t k = 0; k < params_.size(); ++k)
    if (params_[k].requires_grad())
      hooks_.emplace_back(k, params_[k].register_hook([this, k](const torch::Tensor& grad) { onGradient(k, grad); }));
}

GradientSync::~GradientSync() {
  for (const auto& [param, handle] : hooks_) params_[param].remove_hook(handle);
}

void GradientSync::start(int64_t passes) {
  if (!group_.active()) return;
  std::lock_guard<std::mutex> lock(mutex_);
  for (Bucket& b : buckets_) {
    b.flat.zero_();
    b.pending = b.params.size() * size_t(passes);
    b.work.reset();
  }
  std::fill(produced_.begin(), produced_.end(), 0);
  for (auto& g : sparseGrads_) g = torch::Tensor();
  nextLaunch_ = 0;
  overlapped_ = 0;
}

void GradientSync::onGradient(size_t param, const torch::Tensor& grad) {
  torch::NoGradGuard noGrad;
  std::lock_guard<std::mutex> lock(mutex_);
  produced_[param] = 1;
  if (sparse_[param]) {
    TORCH_CHECK(grad.is_sparse(), "GradientSync: a dense gradient for a parameter declared sparse");
    sparseGrads_[param] = sparseGrads_[param].defined() ? sparseGrads_[param] + grad : grad;
    return;
  }
  Bucket& b = buckets_[bucketOf_[param]];
  b.flat.narrow(0, b.offsets[slotOf_[param]], grad.numel()).add_(grad.reshape({-1}));
  --b.pending;
  launchReady(true);
}

void GradientSync::launchReady(bool inBackward) {
  for (; nextLaunch_ < buckets_.size() && (buckets_[nextLaunch_].pending == 0 || !inBackward); ++nextLaunch_) {
    Bucket& b = buckets_[nextLaunch_];
    b.work = group_.allreduceAsync(b.flat);
    overlapped_ += inBackward;
  }
}

void GradientSync::finish() {
  if (!group_.active()) return;
  torch::NoGradGuard noGrad;
  std::lock_guard<std::mutex> lock(mutex_);
  launchReady(false);
  // After every bucket (same order on all ranks): a gradient missing on every rank stays missing
  // (the optimizer skips such a parameter, as in a single process); missing on some ranks only,
  // it counts as zeros there (its slot stayed zero).
  auto defined = torch::empty({static_cast<int64_t>(params_.size())}, torch::kFloat32);  // (P)
  auto mark = defined.accessor<float, 1>();
  for (size_t k = 0; k < params_.size(); ++k) mark[int64_t(k)] = produced_[k] ? 1.0f : 0.0f;
  group_.allreduceSum(defined);
  for (Bucket& b : buckets_) {
    group_.wait(b.work);
    for (size_t s = 0; s < b.params.size(); ++s) {
      torch::Tensor& p = params_[b.params[s]];
      if (mark[int64_t(b.params[s])] == 0.0f) continue;
      if (!p.grad().defined()) p.mutable_grad() = torch::zeros_like(p);
      p.mutable_grad().copy_(b.flat.narrow(0, b.offsets[s], p.numel()).view_as(p));
    }
  }
  for (size_t k = 0; k < params_.size(); ++k)
    if (sparse_[k] && mark[int64_t(k)] != 0.0f) params_[k].mutable_grad() = sumSparse(params_[k], sparseGrads_[k]);
}

torch::Tensor GradientSync::sumSparse(const torch::Tensor& param, const torch::Tensor& grad) {
  // This rank's rows (n) of the parameter and their values (n, ...); n differs between ranks.
  auto valueShape = param.sizes().vec();
  torch::Tensor rows, values;
  if (grad.defined()) {
    auto g = grad.coalesce();
    rows = g.indices()[0];
    values = g.values();
  } else {
    valueShape[0] = 0;
    rows = torch::empty({0}, param.options().dtype(torch::kLong));
    values = torch::empty(valueShape, param.options());
  }
  int64_t longest = group_.allgather(torch::tensor({rows.size(0)})).max().item<int64_t>();
  // Padded to the longest with row 0 and zero values, which add nothing.
  valueShape[0] = longest;
  auto paddedRows = torch::zeros({longest}, rows.options()), paddedValues = torch::zeros(valueShape, values.options());
  paddedRows.narrow(0, 0, rows.size(0)).copy_(rows);
  paddedValues.narrow(0, 0, values.size(0)).copy_(values);
  auto allRows = group_.allgather(paddedRows).unsqueeze(0);  // (1, world * longest)
  auto allValues = group_.allgather(paddedValues);           // (world * longest, ...)
  return torch::sparse_coo_tensor(allRows, allValues, param.sizes()).coalesce();
}

}  // namespace xtrap
