#pragma once
// The report of the GPU test programs (gpu_checks, fused_attention_checks): one line per check,
// "ok" or "FAIL" and what was measured against which tolerance, a tally, and the exit status;
// and the relative differences they measure.
#include <torch/torch.h>

#include <algorithm>
#include <cstdio>
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
inline int report(const char* program) {
  std::printf("%s: %d passed, %d failed\n", program, tally().passes, tally().failures);
  return tally().failures == 0 ? 0 : 1;
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
