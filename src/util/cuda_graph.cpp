#include "util/cuda_graph.h"

#include <stdexcept>
#include <string>

#ifdef XTRAP_WITH_CUDA
#include <ATen/cuda/CUDAEvent.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace xtrap {

#ifdef XTRAP_WITH_CUDA

struct CudaGraph::State {
  explicit State(torch::Device device)
      : device(device), side(c10::cuda::getStreamFromPool(/*isHighPriority=*/false, device.index())) {}
  torch::Device device;
  c10::cuda::CUDAStream side;
  at::cuda::CUDAGraph graph;

  // `work` on the side stream, ordered after what the current stream holds and before what it
  // gets next (event waits: the host does not wait).
  template <class Work>
  void onSideStream(Work&& work) {
    c10::cuda::CUDAGuard onDevice(device);
    auto current = c10::cuda::getCurrentCUDAStream();
    at::cuda::CUDAEvent before, after;
    before.record(current);
    before.block(side);
    {
      c10::cuda::CUDAStreamGuard onSide(side);
      work();
    }
    after.record(side);
    after.block(current);
  }
};

bool CudaGraph::available() { return true; }

CudaGraph::CudaGraph(torch::Device device, std::function<void()> work)
    : state_(std::make_unique<State>(device)), work_(std::move(work)) {}

CudaGraph::~CudaGraph() = default;

void CudaGraph::run() {
  ++runs_;
  if (runs_ <= kWarmups) {
    state_->onSideStream(work_);
    return;
  }
  if (runs_ == kWarmups + 1) {
    state_->onSideStream([&] {
      // Its own memory pool; the global capture mode: another thread's unsafe CUDA call fails the
      // capture instead of corrupting it (autograd's device thread runs the backward into it).
      state_->graph.capture_begin();
      try {
        work_();
      } catch (const std::exception& e) {
        std::string why = e.what();
        try {
          state_->graph.capture_end();  // ends the stream's capture; throws for the invalidated graph
        } catch (const std::exception&) {
        }
        (void)cudaGetLastError();
        throw std::runtime_error("capturing the training step as a CUDA graph failed (train with --cuda-graph off): " +
                                 why.substr(0, why.find('\n')));
      }
      state_->graph.capture_end();
    });
  }
  state_->onSideStream([&] { state_->graph.replay(); });  // the captured run has not run yet
}

#else

struct CudaGraph::State {};

bool CudaGraph::available() { return false; }

CudaGraph::CudaGraph(torch::Device, std::function<void()> work) : work_(std::move(work)) {
  throw std::runtime_error("this LibTorch has no CUDA: no CUDA graphs");
}

CudaGraph::~CudaGraph() = default;

void CudaGraph::run() { work_(); }

#endif

}  // namespace xtrap
