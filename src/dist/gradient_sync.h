#pragma once
// Data-parallel gradient summation that overlaps the backward pass, as DistributedDataParallel
// does: the parameters are cut into buckets of about DistGroup::kBucketBytes in reverse order
// (the order backward produces their gradients), a hook on every parameter adds its gradient
// into its bucket the moment autograd computes it, and a bucket whose gradients are all in is
// all-reduced at once, asynchronously, while backward goes on with earlier layers. Buckets are
// launched in bucket order on every rank (collectives pair up by order). finish() launches the
// buckets still waiting (parameters this rank gave no gradient count as zeros), waits for all,
// and writes the sums into the gradients.
// Sparse gradients (an untied embedding's: a row per token of the step) stay out of the buckets,
// which would hold them dense: finish() gathers every rank's rows and values (all-gather, padded
// to the longest with zero rows) and sums them into one sparse gradient.
//
// Written here rather than with c10d::Reducer (the engine of Python's DistributedDataParallel,
// whose header LibTorch ships): the Reducer expects every rank to run backward each step (an
// encoder rank whose slice has no masked token runs none here, and would leave the others
// waiting), it divides the sums by the world size (xtrap's rank losses are already weighted by
// their share of the step's tokens, so the plain sum is the gradient), and it takes a
// ProcessGroup, which LibTorch 2.x builds around its Gloo/NCCL backends differently from 1.13.
// Tensor hooks and asynchronous collectives are public API in LibTorch 1.13 and 2.x alike.
#include <torch/torch.h>

#include <cstdint>
#include <mutex>
#include <torch/csrc/distributed/c10d/Work.hpp>
#include <utility>
#include <vector>

#include "dist/dist_group.h"

namespace xtrap {

class GradientSync {
 public:
  // Registers the hooks; with no process group (a single process) every call is a no-op.
  // `sparse`: the parameters among `params` whose gradients are sparse tensors.
  GradientSync(DistGroup& group, std::vector<torch::Tensor> params, const std::vector<torch::Tensor>& sparse = {},
               int64_t bucketBytes = DistGroup::kBucketBytes);
  ~GradientSync();  // removes the hooks: the parameters may outlive this object
  GradientSync(const GradientSync&) = delete;
  GradientSync& operator=(const GradientSync&) = delete;

  // Before backward: empty buckets, for `passes` backward passes (micro-batches) whose gradients
  // add up; a bucket is all-reduced once its parameters' gradients of every pass are in.
  void start(int64_t passes = 1);
  void finish();  // after backward: every gradient is the sum over passes and ranks
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
  // The sum over ranks of a sparse gradient (undefined on a rank that produced none).
  torch::Tensor sumSparse(const torch::Tensor& param, const torch::Tensor& grad);

  DistGroup& group_;
  std::vector<torch::Tensor> params_;
  std::vector<Bucket> buckets_;
  std::vector<size_t> bucketOf_, slotOf_;           // per parameter
  std::vector<char> produced_;                      // per parameter: a gradient arrived this step
  std::vector<char> sparse_;                        // per parameter: its gradient is sparse
  std::vector<torch::Tensor> sparseGrads_;          // per parameter: this step's sparse gradient
  std::vector<std::pair<size_t, unsigned>> hooks_;  // (parameter, hook handle)
  size_t nextLaunch_ = 0;
  int64_t overlapped_ = 0;
  std::mutex mutex_;  // autograd may run hooks on its worker threads
};

}  // namespace xtrap
