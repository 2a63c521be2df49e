#pragma once
// One data-parallel job's communication: a c10d process group (Gloo on CPU; NCCL on CUDA when the
// LibTorch found has it) over the TCPStore named by the torchrun environment. With world size 1
// every collective is a no-op, so single-process code paths are the same calls.
//
// A rank that dies fails the collectives of the others (Gloo sees its sockets close; a rank that
// hangs instead hits the Gloo timeout). Every rank also bumps a heartbeat counter in the store
// once a second from a thread; when a collective fails the survivors read the counters to name
// the rank that stopped, and throw a one-line std::runtime_error saying so.
#include <torch/torch.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "dist/dist_env.h"
#include "util/torch_compat.h"

namespace c10d {
class Store;
class ProcessGroup;
class Backend;
class Work;
}  // namespace c10d

namespace xtrap {

// What runs the collectives: LibTorch 1.x's ProcessGroupGloo/NCCL are ProcessGroups; from 2.0 on
// they are Backends (a ProcessGroup dispatches to them), with the same allreduce/barrier calls.
#if XTRAP_TORCH_AT_LEAST(2, 0)
using CollectiveBackend = c10d::Backend;
#else
using CollectiveBackend = c10d::ProcessGroup;
#endif

class DistGroup {
 public:
  // Joins the job described by `env` (blocks until all ranks are there, at most kTimeout; a
  // SIGINT/SIGTERM meanwhile exits at once with one line, nothing being written yet). Each group
  // made in one process gets its own store prefix (under the job id), so train and eval may each
  // make one, in the same order on every rank.
  explicit DistGroup(const DistEnv& env = distEnvFromEnvironment(), torch::Device device = torch::kCPU);
  ~DistGroup();
  DistGroup(const DistGroup&) = delete;
  DistGroup& operator=(const DistGroup&) = delete;

  int rank() const { return env_.rank; }
  int world() const { return env_.world; }
  bool isRoot() const { return env_.rank == 0; }

  bool active() const { return bool(group_); }  // a process group exists (else every call is a no-op)

  // In-place sum over ranks.
  void allreduceSum(torch::Tensor& tensor);
  // Starts an in-place sum over ranks of a tensor on the group's device; wait() finishes it. A
  // failure of either is the one-line error of fail().
  c10::intrusive_ptr<c10d::Work> allreduceAsync(torch::Tensor& tensor);
  void wait(const c10::intrusive_ptr<c10d::Work>& work);
  // Every rank's `tensor` (the same shape on all), concatenated along dimension 0 in rank order.
  torch::Tensor allgather(const torch::Tensor& tensor);
  // In place on every rank: `tensor` (contiguous, on the group's device, the same shape on all)
  // becomes rank `root`'s. No buffer of its size is made: a slice of a parameter can be broadcast
  // into the parameter itself.
  void broadcast(torch::Tensor& tensor, int root);
  // Point to point, in place: `tensor` (contiguous, on the group's device) to rank `to`, or
  // filled from rank `from`.
  void send(torch::Tensor& tensor, int to);
  void receive(torch::Tensor& tensor, int from);
  void barrier();

  static constexpr int64_t kBucketBytes = 25 << 20;  // gradient buckets: DDP's default bucket_cap_mb
  // A rank silent for this long inside a collective is declared lost.
  static constexpr std::chrono::seconds kTimeout{300};

 private:
  // Connects to the store under `prefix`, waits for every rank (at most kTimeout) and makes the
  // process group; runs on the constructor's helper thread.
  void join(const std::string& prefix);
  [[noreturn]] void fail(const std::exception& error);
  template <class Call>
  auto guarded(Call&& call);
  void heartbeatLoop();

  DistEnv env_;
  torch::Device device_;                   // where the collectives' tensors live (CUDA for NCCL)
  c10::intrusive_ptr<c10d::Store> store_;  // prefixed for this group
  c10::intrusive_ptr<c10d::Store> heartbeatStore_;
  c10::intrusive_ptr<CollectiveBackend> group_;
  std::atomic<bool> stopHeartbeat_{false};
  std::thread heartbeat_;
};

}  // namespace xtrap
