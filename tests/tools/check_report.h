#pragma once
// The report of the GPU test programs (gpu_checks, fused_attention_checks, ...): one line per
// check, "ok" or "FAIL" and what was measured against which tolerance, a tally, and the exit status;
// the status of a program that cannot run here; and the relative differences they measure.
#include <torch/torch.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <string>

namespace checks {

struct Tally {
  int passes = 0, failures = 0;
};
inline Tally& tally() {
  static Tally t;
  return t;
}

inline void check(bool ok, const std::string& what) {
  std::printf("%s  %s\n", ok ? "ok  " : "FAIL", what.c_str());
  std::fflush(stdout);
  (ok ? tally().passes : tally().failures) += 1;
}

// The summary line; the program's exit status.
inline int report(const std::string& program) {
  std::printf("%s: %d passed, %d failed\n", program.c_str(), tally().passes, tally().failures);
  return tally().failures == 0 ? 0 : 1;
}

// Runs `checks` (calls of check()), an exception that escapes them counting as one failure; the
// summary line and exit status of `program`.
inline int runChecks(const std::string& program, const std::function<void()>& checks) {
  try {
    checks();
  } catch (const std::exception& e) {
    check(false, std::string("exception: ") + e.what());
  }
  return report(program);
}

// Exit status 77 (ctest: skipped), after a line saying why, where this build or machine cannot run
// the checks: without a GPU, or, where needsKernels, in a build without the fused CUDA kernels.
// 0 where it can.
inline int skipStatus(bool needsKernels) {
#ifndef XTRAP_WITH_CUDA_KERNELS
  if (needsKernels) {
    std::puts("skipped: this build has no fused CUDA kernels (a CUDA LibTorch and nvcc are needed)");
    return 77;
  }
#endif
  if (!torch::cuda::is_available()) {
    std::puts("skipped: no CUDA");
    return 77;
  }
  return 0;
}

inline std::string fmtDouble(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}

// RMS and largest magnitude of a tensor, in float64.
inline double rms(const torch::Tensor& t) {
  return t.detach().to(torch::kFloat64).square().mean().sqrt().item<double>();
}
inline double maxAbs(const torch::Tensor& t) { return t.detach().to(torch::kFloat64).abs().max().item<double>(); }

// max |got - reference| / max(max |reference|, floor), in float64: relative to the largest element,
// absolute where the reference is (near) zero.
inline double relativeMaxDiff(const torch::Tensor& reference, const torch::Tensor& got, double floor = 1e-12) {
  auto r = reference.detach().to(torch::kFloat64), g = got.detach().to(torch::kFloat64);
  return maxAbs(r - g) / std::max(maxAbs(r), floor);
}

// RMS of the difference relative to max(RMS of the reference, floor), in float64.
inline double relativeRms(const torch::Tensor& reference, const torch::Tensor& got, double floor = 1e-12) {
  auto r = reference.detach().to(torch::kFloat64), g = got.detach().to(torch::kFloat64);
  return rms(r - g) / std::max(rms(r), floor);
}

}  // namespace checks
