#pragma once
// Device memory stand-in for the emulated kernels' tests: 128-byte aligned (what cudaMalloc
// gives), with a guard after the end that must stay untouched (global-memory bounds are not
// modelled otherwise).
#include <cstdlib>
#include <cstring>
#include <memory>

namespace cuda_emulation {

template <typename T>
class Buffer {
 public:
  explicit Buffer(size_t n) : n_(n), memory_(static_cast<T*>(std::aligned_alloc(128, bytes())), std::free) {
    std::memset(memory_.get(), kGuard, bytes());
  }
  T* data() { return memory_.get(); }
  const T* data() const { return memory_.get(); }
  T& operator[](size_t i) { return memory_.get()[i]; }
  const T& operator[](size_t i) const { return memory_.get()[i]; }
  bool guardIntact() const {
    const auto* guard = reinterpret_cast<const unsigned char*>(memory_.get() + n_);
    for (size_t b = 0; b < kGuardBytes; ++b)
      if (guard[b] != kGuard) return false;
    return true;
  }

 private:
  static constexpr unsigned char kGuard = 0x5A;
  static constexpr size_t kGuardBytes = 256;
  size_t bytes() const { return (n_ * sizeof(T) + kGuardBytes + 127) / 128 * 128; }
  size_t n_;
  std::unique_ptr<T, decltype(&std::free)> memory_;
};

}  // namespace cuda_emulation
