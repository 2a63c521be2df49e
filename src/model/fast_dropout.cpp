#include "model/fast_dropout.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>

#include <cmath>
#include <mutex>

#include "model/counter_dropout.h"

namespace xtrap {
namespace {

constexpr int64_t kGrain = 1 << 15;

uint64_t drawSeed() {
  auto gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  return gen.get<at::CPUGeneratorImpl>()->random64();
}

}  // namespace

uint64_t drawDropoutSeed() { return drawSeed(); }

DroppedBlock dropBlock(const torch::Tensor& input, double p, uint64_t seed, const DropoutLayout& at) {
  auto x = input.contiguous();  // (outer, rows, cols)
  TORCH_CHECK(x.dim() >= 2, "dropBlock: a tensor of rows");
  const int64_t cols = std::max<int64_t>(x.size(-1), 1);
  const int64_t blockRows = x.size(-2);  // rows of one outer slice in this block
  DroppedBlock d{torch::empty_like(x), torch::empty(x.sizes(), x.options().dtype(torch::kUInt8)),
                 static_cast<float>(1.0 / (1.0 - p))};
  const uint32_t threshold = dropoutThreshold(p);
  float scale = d.scale;
  const float* src = x.data_ptr<float>();
  float* dst = d.out.data_ptr<float>();
  uint8_t* keep = d.mask.data_ptr<uint8_t>();
  auto seedLo = static_cast<uint32_t>(seed), seedHi = static_cast<uint32_t>(seed >> 32);
  at::parallel_for(0, x.numel(), kGrain, [&](int64_t begin, int64_t end) {
    // Row r of this block is row (rowOffset + r % blockRows) of outer slice r / blockRows; its
    // element c is element (that row) * totalCols + c of the whole tensor.
    for (int64_t r = begin / cols, i = begin; i < end; ++r) {
      int64_t whole = (r / blockRows) * at.totalRows + at.rowOffset + r % blockRows;
      auto first = static_cast<uint32_t>(whole * at.totalCols - r * cols);  // index of element i, minus i
      for (int64_t rowEnd = std::min(end, (r + 1) * cols); i < rowEnd; ++i) {
        uint8_t k = hashIndex(first + static_cast<uint32_t>(i), seedLo, seedHi) >= threshold;
        keep[i] = k;
        dst[i] = src[i] * (k ? scale : 0.0f);  // a multiply, so NaN and inf still propagate
      }
    }
  });
  return d;
}

namespace {

// One parallel pass: the keep decision of element i hashes (seed, i); kept elements scale by
// 1 / (1 - p).
DroppedBlock dropElements(const torch::Tensor& input, double p) {
  DroppedBlock d = dropBlock(input.reshape({1, -1}), p, drawSeed(), {0, 1, input.numel()});
  return {d.out.view(input.sizes()), d.mask.view(input.sizes()), d.scale};
}

}  // namespace

// x * mask * scale: the backward of dropElements, and its forward again from a saved mask.
torch::Tensor applyMask(const torch::Tensor& input, const torch::Tensor& mask, float scale) {
  auto x = input.contiguous();
  auto out = torch::empty_like(x);
  const float* src = x.data_ptr<float>();
  float* dst = out.data_ptr<float>();
  const uint8_t* keep = mask.data_ptr<uint8_t>();
  at::parallel_for(0, x.numel(), kGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) dst[i] = src[i] * (keep[i] ? scale : 0.0f);
  });
  return out;
}

namespace {

bool kernelApplies(const torch::Tensor& x, double p) {
  // The kernel handles float32 CPU tensors of fewer than 2^32 elements (the hash takes a 32-bit
  // index); anything else (a GPU tensor, bfloat16 activations) takes LibTorch's dropout.
  return x.device().is_cpu() && x.scalar_type() == torch::kFloat32 && x.numel() < (int64_t(1) << 32) && p < 1.0;
}

struct DropoutFunction : torch::autograd::Function<DropoutFunction> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& input, double p) {
    DroppedBlock d = dropElements(input, p);
    ctx->save_for_backward({d.mask});
    ctx->saved_data["scale"] = static_cast<double>(d.scale);
    return d.out;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    auto scale = static_cast<float>(ctx->saved_data["scale"].toDouble());
    return {applyMask(grads[0], ctx->get_saved_variables()[0], scale), torch::Tensor()};
  }
};

// dropout(probs) @ v keeping probs (softmax keeps it anyway) and the mask, not dropout(probs):
// backward rebuilds the dropped probabilities from the two.
struct DropoutMatmulFunction : torch::autograd::Function<DropoutMatmulFunction> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& probs,
                               const torch::Tensor& v, double p) {
    DroppedBlock d = dropElements(probs, p);
    ctx->save_for_backward({probs, v, d.mask});
    ctx->saved_data["scale"] = static_cast<double>(d.scale);
    return d.out.matmul(v);  // (..., Tq, D)
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    auto saved = ctx->get_saved_variables();
    const auto &probs = saved[0], &v = saved[1], &mask = saved[2];
    auto scale = static_cast<float>(ctx->saved_data["scale"].toDouble());
    const auto& dy = grads[0];                                             // (..., Tq, D)
    auto dv = applyMask(probs, mask, scale).transpose(-2, -1).matmul(dy);  // (..., Tk, D)
    auto dprobs = applyMask(dy.matmul(v.transpose(-2, -1)), mask, scale);  // (..., Tq, Tk)
    return {dprobs, dv, torch::Tensor()};
  }
};

}  // namespace

torch::Tensor fastDropout(const torch::Tensor& x, double p, bool training) {
  if (!training || p <= 0.0) return x;
  if (!kernelApplies(x, p)) return torch::dropout(x, p, training);
  return DropoutFunction::apply(x, p);
}

torch::Tensor dropoutMatmul(const torch::Tensor& probs, const torch::Tensor& v, double p, bool training) {
  if (training && p > 0.0 && kernelApplies(probs, p) && v.scalar_type() == torch::kFloat32)
    return DropoutMatmulFunction::apply(probs, v, p);
  return fastDropout(probs, p, training).to(v.scalar_type()).matmul(v);
}

}  // namespace xtrap
