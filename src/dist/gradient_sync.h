#pragma once
// Data-parallel gradient summation that overlaps the backward pass, as DistributedDataParallel
// does: the parameters are cut into buckets of about DistGroup::kBucketBytes in reverse order
// (the order backward produces their gradients), a hook on every parameter copies its gradient
// into its bucket the moment autograd computes it, and a bucket whose gradients are all in is
// all-reduced at once, asynchronously, while backward goes on with earlier layers. Buckets are
// launched in bucket order on every rank (collectives pair up by order). finish() launches the
// buckets still waiting (parameters this rank gave no gradient count as zeros), waits for all,
// and writes the sums into the gradients.
//
// Written here rather than with c10d::Reducer: the Reducer's C++ interface is internal to
// LibTorch (it is built for the Python DDP module and changes between releases); the tensor hooks
// and asynchronous collectives used here are public API in LibTorch 1.13 and 2.x alike.
#include <torch/torch.h>

#include <cstdint>
#include <mutex>
#include <torch/csrc/distributed/c10d/Work.hpp>
#include <vector>

#include "dist/dist_group.h"

namespace xtrap {

class GradientSync {
 public:
  // Registers the hooks; with no process group (a single process) every call is a no-op.
  GradientSync(DistGroup& group, std::vector<torch::Tensor> params, int64_t bucketBytes = DistGroup::kBucketBytes);
  GradientSync(const GradientSync&) = delete;
  GradientSync& operator=(const GradientSync&) = delete;

  void start();   // before backward: empty buckets
  void finish();  // after backward: every gradient is the sum over ranks
  // Buckets whose all-reduce started while backward was still running, in the last step.
  int64_t bucketsOverlapped() const { return overlapped_; }
  int64_t buckets() const { return static_cast<int64_t>(buckets_.size()); }

 private:
  struct Bucket {
    std::vector<size_t> params;  // indices into params_, in the order of `offsets`
    std::vector<int64_t> offsets;
    torch::Tensor flat;  // (sum of numel) the gradients, then their sums
    size_t pending = 0;
    c10::intrusive_ptr<c10d::Work> work;
  };
  void onGradient(size_t param, const torch::Tensor& grad);
  void launchReady(bool inBackward);  // launches, in order, every bucket whose gradients are all in

  DistGroup& group_;
  std::vector<torch::Tensor> params_;
  std::vector<Bucket> buckets_;
  std::vector<size_t> bucketOf_, slotOf_;  // per parameter
  std::vector<char> produced_;             // per parameter: a gradient arrived this step
  size_t nextLaunch_ = 0;
  int64_t overlapped_ = 0;
  std::mutex mutex_;  // autograd may run hooks on its worker threads
};

}  // namespace xtrap
