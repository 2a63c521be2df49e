#pragma once
// Where and in what precision xtrap computes, chosen once per command (--device, --dtype, or a
// scenario's keys) and carried by one ExecutionContext. Device and precision then appear in three
// places only: moving the model (place()), moving a batch (TransformerImpl::input()), and the one
// autocast scope around the model's forward (AutocastScope). Everything else follows the
// parameters. Host reads of tensors that may live on a GPU go through toHost().
#include <torch/torch.h>

#include <string>
#include <vector>

#include "util/device_names.h"

namespace xtrap {

struct ExecutionContext {
  torch::Device device = torch::kCPU;
  // Compute precision: float32, or bfloat16 under autocast (parameters, optimizer state, softmax
  // statistics and losses stay float32).
  torch::ScalarType dtype = torch::kFloat32;

  bool lowPrecision() const { return dtype != torch::kFloat32; }
  std::string deviceName() const;  // "cpu" or "cuda" (the kind, as run.json records it)
  std::string dtypeName() const;   // "float32" or "bfloat16"
};

// Parses --device (auto | cpu | cuda) and --dtype (float32 | bfloat16). `auto` is CUDA when this
// LibTorch has CUDA and a GPU is visible, else the CPU; under torchrun `localRank` picks cuda:N.
// A bad name, or cuda where LibTorch has none, is a one-line std::invalid_argument.
ExecutionContext makeExecutionContext(const std::string& device, const std::string& dtype, int localRank = 0);
// Whether a --device name (valid) means CUDA here: cuda, or auto where a GPU is visible.
bool meansCuda(const std::string& device);

// The compute precision of `device`'s type for the scope's lifetime: autocast to `dtype`, or
// autocast off for float32 (parts that must stay float32 inside a bfloat16 forward). Restores the
// previous state at the end, so scopes nest.
class AutocastScope {
 public:
  AutocastScope(torch::Device device, torch::ScalarType dtype);
  ~AutocastScope();
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

 private:
  bool active_ = false;    // the scope changed the state
  bool enabling_ = false;  // and turned autocast on
  c10::DeviceType type_ = c10::DeviceType::CPU;
  bool previousEnabled_ = false;
  at::ScalarType previousDtype_ = at::kFloat;
};

// The host boundary: a detached, contiguous CPU copy (the tensor itself when it already is one),
// and its values as doubles. Every host read of a tensor that may live on a GPU goes through here.
torch::Tensor toHost(const torch::Tensor& t);
std::vector<double> toHostDoubles(const torch::Tensor& t);
// The other way: a tensor built on the host (a batch, its target rows) onto `device`. A GPU gets it
// from pinned memory without blocking: a copy from pageable memory first waits for every kernel
// queued before it, a host synchronisation on every step.
torch::Tensor toDevice(const torch::Tensor& t, torch::Device device);

// The most memory LibTorch's CUDA caching allocator has handed out on `device` since the last
// reset, in MiB (torch.cuda.max_memory_allocated): a pass's peak, tensors only (not the allocator's
// cache or the CUDA context). -1 on the CPU, where no allocator keeps such a peak.
void resetPeakMemory(torch::Device device);
double peakMemoryMiB(torch::Device device);

// The CUDA generator of `device` (dropout on the GPU draws from it), for checkpoints: its state
// when `device` is a CUDA device, undefined otherwise; restoring an undefined state does nothing.
torch::Tensor cudaGeneratorState(torch::Device device);
void restoreCudaGeneratorState(torch::Device device, const torch::Tensor& state);

}  // namespace xtrap
