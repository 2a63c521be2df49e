#include "model/fast_dropout.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>

#include <cmath>
#include <mutex>

namespace xtrap {
namespace {

// murmur3's 32-bit finaliser over a Weyl sequence: independent-looking bits per element, and
// 32-bit multiplies vectorise (AVX2 has no 64-bit multiply).
inline uint32_t hashIndex(uint32_t i, uint32_t seedLo, uint32_t seedHi) {
  uint32_t h = i * 0x9E3779B9u + seedLo;
  h ^= seedHi;
  h ^= h >> 16;
  h *= 0x85EBCA6Bu;
  h ^= h >> 13;
  h *= 0xC2B2AE35u;
  h ^= h >> 16;
  return h;
}

constexpr int64_t kGrain = 1 << 15;

struct DropoutFunction : torch::autograd::Function<DropoutFunction> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& input, double p) {
    auto x = input.contiguous();
    uint64_t seed;
    {
      auto gen = at::detail::getDefaultCPUGenerator();
      std::lock_guard<std::mutex> lock(gen.mutex());
      seed = gen.get<at::CPUGeneratorImpl>()->random64();
    }
    auto out = torch::empty_like(x);
    auto mask = torch::empty(x.sizes(), x.options().dtype(torch::kUInt8));
    // Keep when the hash is >= p * 2^32 (probability 1 - p up to 2^-32).
    auto threshold = static_cast<uint32_t>(std::min(p * 4294967296.0, 4294967295.0));
    float scale = static_cast<float>(1.0 / (1.0 - p));
    const float* src = x.data_ptr<float>();
    float* dst = out.data_ptr<float>();
    uint8_t* keep = mask.data_ptr<uint8_t>();
    auto seedLo = static_cast<uint32_t>(seed), seedHi = static_cast<uint32_t>(seed >> 32);
    at::parallel_for(0, x.numel(), kGrain, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        uint8_t k = hashIndex(static_cast<uint32_t>(i), seedLo, seedHi) >= threshold;
        keep[i] = k;
        dst[i] = src[i] * (k ? scale : 0.0f);  // a multiply, so NaN and inf still propagate
      }
    });
    ctx->save_for_backward({mask});
    ctx->saved_data["scale"] = static_cast<double>(scale);
    return out;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    auto mask = ctx->get_saved_variables()[0];
    auto scale = static_cast<float>(ctx->saved_data["scale"].toDouble());
    auto g = grads[0].contiguous();
    auto dx = torch::empty_like(g);
    const float* src = g.data_ptr<float>();
    float* dst = dx.data_ptr<float>();
    const uint8_t* keep = mask.data_ptr<uint8_t>();
    at::parallel_for(0, g.numel(), kGrain, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) dst[i] = src[i] * (keep[i] ? scale : 0.0f);
    });
    return {dx, torch::Tensor()};
  }
};

}  // namespace

torch::Tensor fastDropout(const torch::Tensor& x, double p, bool training) {
  if (!training || p <= 0.0) return x;
  // The kernel handles float32 CPU tensors of fewer than 2^32 elements (the hash takes a 32-bit
  // index); anything else (a GPU tensor, bfloat16 activations) takes LibTorch's dropout.
  if (!x.device().is_cpu() || x.scalar_type() != torch::kFloat32 || x.numel() >= (int64_t(1) << 32) || p >= 1.0)
    return torch::dropout(x, p, training);
  return DropoutFunction::apply(x, p);
}

}  // namespace xtrap
