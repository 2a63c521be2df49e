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
