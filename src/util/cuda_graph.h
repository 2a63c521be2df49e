#pragma once
// One piece of GPU work captured once as a CUDA graph and replayed (LibTorch's at::cuda::CUDAGraph):
// a whole training step's kernels in one launch instead of thousands. The work runs on a side
// stream (a capture needs one) that waits for the current stream before and is waited for after,
// so what the host enqueued before (a batch copied into the work's input buffer) is in place and
// what follows (a read of its outputs) sees them, without a host synchronisation. The first
// kWarmups runs are not captured: they make the lazy state (cuBLAS workspaces, the side stream's
// cached blocks, cast caches) before the capture, which must allocate only from its own memory
// pool. The run after them is captured and then replayed, and every later run is a replay: the
// work must read its inputs from, and write its outputs to, tensors that live as long as this
// object, and its kernels' host-side arguments are fixed at capture. A capture that fails (the
// work synchronised with the host, say) throws a one-line std::runtime_error.
// Only in builds with CUDA (XTRAP_WITH_CUDA); elsewhere available() is false and the constructor
// throws.
#include <torch/torch.h>

#include <functional>
#include <memory>

namespace xtrap {

class CudaGraph {
 public:
  static constexpr int kWarmups = 3;
  static bool available();  // this build can capture

  CudaGraph(torch::Device device, std::function<void()> work);
  ~CudaGraph();
  CudaGraph(const CudaGraph&) = delete;
  CudaGraph& operator=(const CudaGraph&) = delete;

  void run();  // the work: eagerly, captured, or replayed
  bool captured() const { return runs_ > kWarmups; }

 private:
  struct State;
  std::unique_ptr<State> state_;
  std::function<void()> work_;
  int runs_ = 0;
};

}  // namespace xtrap
