#include "util/execution_context.h"

#include <stdexcept>

#include "util/torch_compat.h"
#ifdef XTRAP_WITH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#endif

namespace xtrap {

std::string ExecutionContext::deviceName() const { return device.is_cuda() ? "cuda" : "cpu"; }
std::string ExecutionContext::dtypeName() const { return dtype == torch::kBFloat16 ? "bfloat16" : "float32"; }

ExecutionContext makeExecutionContext(const std::string& device, const std::string& dtype, int localRank) {
  checkDeviceName(device);
  checkDtypeName(dtype);
  ExecutionContext ctx;
  ctx.dtype = dtype == "bfloat16" ? torch::kBFloat16 : torch::kFloat32;
  if (device == "cuda" && !torch::cuda::is_available())
    throw std::invalid_argument("--device cuda: this LibTorch has no CUDA or no GPU is visible (use cpu or auto)");
  if (meansCuda(device)) {
    int64_t gpus = static_cast<int64_t>(torch::cuda::device_count());
    if (localRank >= gpus)
      throw std::invalid_argument("LOCAL_RANK " + std::to_string(localRank) + " has no GPU (" + std::to_string(gpus) +
                                  " visible)");
    ctx.device = torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(localRank));
  }
  return ctx;
}

bool meansCuda(const std::string& device) {
  return device == "cuda" || (device == "auto" && torch::cuda::is_available());
}

AutocastScope::AutocastScope(torch::Device device, torch::ScalarType dtype) : type_(device.type()) {
  previousEnabled_ = compat::autocastEnabled(type_);
  enabling_ = dtype != torch::kFloat32;
  if (!enabling_ && !previousEnabled_) return;  // float32 already: nothing to change
  active_ = true;
  previousDtype_ = compat::autocastDtype(type_);
  compat::setAutocast(type_, enabling_, enabling_ ? dtype : previousDtype_);
  if (enabling_) at::autocast::increment_nesting();
}

AutocastScope::~AutocastScope() {
  if (!active_) return;
  // The outermost enabling scope drops the cast weights autocast cached (as torch.autocast does).
  if (enabling_ && at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
  compat::setAutocast(type_, previousEnabled_, previousDtype_);
}

torch::Tensor toHost(const torch::Tensor& t) { return t.detach().to(torch::kCPU).contiguous(); }

std::vector<double> toHostDoubles(const torch::Tensor& t) {
  auto c = toHost(t).to(torch::kFloat64).contiguous();
  return {c.data_ptr<double>(), c.data_ptr<double>() + c.numel()};
}

torch::Tensor toDevice(const torch::Tensor& t, torch::Device device) {
  if (t.device() == device) return t;
  // The pinned copy outlives the copy: the caching host allocator keeps its block until the copy's
  // stream passes it.
  if (t.is_cpu() && device.is_cuda()) return t.pin_memory().to(device, /*non_blocking=*/true);
  return t.to(device);
}

#ifdef XTRAP_WITH_CUDA
namespace {
c10::DeviceIndex cudaIndex(torch::Device device) {
  return device.has_index() ? device.index() : c10::cuda::current_device();
}
}  // namespace
#endif

void resetPeakMemory(torch::Device device) {
#ifdef XTRAP_WITH_CUDA
  if (device.is_cuda()) c10::cuda::CUDACachingAllocator::resetPeakStats(cudaIndex(device));
#else
  (void)device;
#endif
}

double peakMemoryMiB(torch::Device device) {
#ifdef XTRAP_WITH_CUDA
  // allocated_bytes[0]: StatType::AGGREGATE, every pool.
  if (device.is_cuda())
    return double(c10::cuda::CUDACachingAllocator::getDeviceStats(cudaIndex(device)).allocated_bytes[0].peak) /
           (1 << 20);
#else
  (void)device;
#endif
  return -1;
}

torch::Tensor cudaGeneratorState(torch::Device device) {
  if (!device.is_cuda()) return {};
  auto gen = at::globalContext().defaultGenerator(device);
  std::lock_guard<std::mutex> lock(gen.mutex());
  return gen.get_state();
}

void restoreCudaGeneratorState(torch::Device device, const torch::Tensor& state) {
  if (!device.is_cuda() || !state.defined()) return;
  auto gen = at::globalContext().defaultGenerator(device);
  std::lock_guard<std::mutex> lock(gen.mutex());
  gen.set_state(state);
}

}  // namespace xtrap
