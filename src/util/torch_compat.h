#pragma once
// Every LibTorch version check in xtrap lives here. xtrap builds against Debian's LibTorch 1.13
// (CPU) and the PyTorch wheel's LibTorch 2.x (CUDA) from one source.
#include <ATen/autocast_mode.h>
#include <torch/torch.h>
#include <torch/version.h>

#define XTRAP_TORCH_AT_LEAST(major, minor) \
  (TORCH_VERSION_MAJOR > (major) || (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))

// at::scaled_dot_product_attention with an additive float mask and an explicit scale (2.1+).
// 1.13 has only the private, unfused _scaled_dot_product_attention: no SDPA path there.
#if XTRAP_TORCH_AT_LEAST(2, 1)
#define XTRAP_HAS_SDPA 1
#endif

namespace xtrap::compat {

// Whether this LibTorch has the SDPA path at all, and whether its CPU kernel is fused (2.3+:
// flash-style, takes an additive mask, never holds the T x T probabilities; no dropout, so it
// serves inference only). Below 2.3 SDPA on the CPU is the unfused math xtrap's own paths beat.
constexpr bool kHasSdpa =
#ifdef XTRAP_HAS_SDPA
    true;
#else
    false;
#endif
constexpr bool kHasFusedCpuSdpa = XTRAP_TORCH_AT_LEAST(2, 3);

// One multi-tensor AdamW step of every listed parameter on a GPU: the kernel of PyTorch's
// AdamW(fused=True), at::_fused_adamw_ (2.1+). Its formula is LibTorch's AdamW::step (decoupled
// decay p *= 1 - lr wd; m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2; p -= lr / (1 - b1^t)
// m / (sqrt(v) / sqrt(1 - b2^t) + eps)), with t read from `steps` (0-dim float32 on the GPU).
constexpr bool kHasFusedAdamW = XTRAP_TORCH_AT_LEAST(2, 1);
inline void fusedAdamW(const std::vector<at::Tensor>& params, const std::vector<at::Tensor>& grads,
                       const std::vector<at::Tensor>& expAvgs, const std::vector<at::Tensor>& expAvgSqs,
                       const std::vector<at::Tensor>& steps, double lr, double beta1, double beta2, double weightDecay,
                       double eps) {
#if XTRAP_TORCH_AT_LEAST(2, 1)
  at::_fused_adamw_(params, grads, expAvgs, expAvgSqs, at::TensorList(), steps, lr, beta1, beta2, weightDecay, eps,
                    /*amsgrad=*/false, /*maximize=*/false);
#else
  (void)params, (void)grads, (void)expAvgs, (void)expAvgSqs, (void)steps;
  (void)lr, (void)beta1, (void)beta2, (void)weightDecay, (void)eps;
  TORCH_CHECK(false, "fused AdamW needs LibTorch 2.1 or newer");
#endif
}

// The same kernel with the learning rate read from `lr` (a 0-dim float32 tensor on the GPU) and a
// step skipped on the device where `foundInf` (0-dim float32, 0 or 1) is 1: what a captured
// training step (train/device_step.h) needs, whose host values are fixed at capture. The tensor-lr
// overload is 2.2+. The caller counts `steps` up before and back down where foundInf is 1, as
// PyTorch's _fused_adamw does (the kernel reads them, it does not count).
constexpr bool kHasFusedAdamWTensorLr = XTRAP_TORCH_AT_LEAST(2, 2);
inline void fusedAdamW(const std::vector<at::Tensor>& params, const std::vector<at::Tensor>& grads,
                       const std::vector<at::Tensor>& expAvgs, const std::vector<at::Tensor>& expAvgSqs,
                       const std::vector<at::Tensor>& steps, const at::Tensor& lr, double beta1, double beta2,
                       double weightDecay, double eps, const at::Tensor& foundInf) {
#if XTRAP_TORCH_AT_LEAST(2, 2)
  at::_fused_adamw_(params, grads, expAvgs, expAvgSqs, at::TensorList(), steps, lr, beta1, beta2, weightDecay, eps,
                    /*amsgrad=*/false, /*maximize=*/false, /*grad_scale=*/c10::nullopt, foundInf);
#else
  (void)params, (void)grads, (void)expAvgs, (void)expAvgSqs, (void)steps, (void)lr;
  (void)beta1, (void)beta2, (void)weightDecay, (void)eps, (void)foundInf;
  TORCH_CHECK(false, "fused AdamW with a tensor learning rate needs LibTorch 2.2 or newer");
#endif
}

// Every tensor of `tensors` times the 0-dim `factor` (on their device), in place, without reading
// it on the host: one multi-tensor kernel with LibTorch 2.1+ (_foreach_mul_.Tensor), one multiply
// per tensor before.
inline void multiplyEach(std::vector<at::Tensor>& tensors, const at::Tensor& factor) {
#if XTRAP_TORCH_AT_LEAST(2, 1)
  if (!tensors.empty()) at::_foreach_mul_(tensors, factor);
#else
  for (auto& t : tensors) t.mul_(factor);
#endif
}

// Autocast for one device type: 1.13 has per-backend functions, 2.4+ takes the device type
// (the per-backend ones are deprecated there).
inline bool autocastEnabled(c10::DeviceType type) {
#if XTRAP_TORCH_AT_LEAST(2, 4)
  return at::autocast::is_autocast_enabled(type);
#else
  return type == c10::DeviceType::CUDA ? at::autocast::is_enabled() : at::autocast::is_cpu_enabled();
#endif
}
inline at::ScalarType autocastDtype(c10::DeviceType type) {
#if XTRAP_TORCH_AT_LEAST(2, 4)
  return at::autocast::get_autocast_dtype(type);
#else
  return type == c10::DeviceType::CUDA ? at::autocast::get_autocast_gpu_dtype()
                                       : at::autocast::get_autocast_cpu_dtype();
#endif
}
inline void setAutocast(c10::DeviceType type, bool enabled, at::ScalarType dtype) {
#if XTRAP_TORCH_AT_LEAST(2, 4)
  at::autocast::set_autocast_enabled(type, enabled);
  at::autocast::set_autocast_dtype(type, dtype);
#else
  if (type == c10::DeviceType::CUDA) {
    at::autocast::set_enabled(enabled);
    at::autocast::set_autocast_gpu_dtype(dtype);
  } else {
    at::autocast::set_cpu_enabled(enabled);
    at::autocast::set_autocast_cpu_dtype(dtype);
  }
#endif
}

}  // namespace xtrap::compat
