#include "model/linear_nll.h"

#include <limits>

#include "util/execution_context.h"
#include "util/torch_compat.h"

#ifdef XTRAP_WITH_CUDA_KERNELS
#include "model/linear_nll_cuda.h"
#endif

namespace xtrap {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The dtype the matmul runs in: autocast's for this device when it is on, else the inputs'.
at::ScalarType matmulDtype(const torch::Tensor& x, const torch::Tensor& w) {
  auto type = x.device().type();
  if (compat::autocastEnabled(type)) return compat::autocastDtype(type);
  return at::promote_types(x.scalar_type(), w.scalar_type());
}

// One block of classes [begin, begin + n): every row's float32 logits for them, which rows'
// target lies in the block and where.
struct ClassBlock {
  torch::Tensor logits;   // (N, n) float32
  torch::Tensor inBlock;  // (N) bool
  torch::Tensor local;    // (N, 1) int64 target - begin, clamped into the block
};

ClassBlock classBlock(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& bias,
                      const torch::Tensor& targets, int64_t begin, int64_t n) {
  auto logits = x.matmul(w.narrow(0, begin, n).t()).to(torch::kFloat32);
  if (bias.numel() > 0) logits = logits + bias.narrow(0, begin, n).to(torch::kFloat32);
  auto inBlock = (targets >= begin) & (targets < begin + n);
  return {logits, inBlock, (targets - begin).clamp(0, n - 1).unsqueeze(1)};
}

// Whether each block's float32 passes run as linear_nll.cu's kernels on its bf16 logits (one read
// of them per pass) rather than as LibTorch operators over float32 copies: bf16 matmuls on a GPU.
bool fusedPasses(const torch::Tensor& x, at::ScalarType dtype) {
#ifdef XTRAP_WITH_CUDA_KERNELS
  return fusedNllTakes(x.device(), dtype);
#else
  (void)x, (void)dtype;
  return false;
#endif
}

#ifdef XTRAP_WITH_CUDA_KERNELS
// The block's bias in float32, or undefined without one.
torch::Tensor biasBlock(const torch::Tensor& bias, int64_t begin, int64_t n) {
  return bias.numel() > 0 ? bias.narrow(0, begin, n).to(torch::kFloat32).contiguous() : torch::Tensor();
}
#endif

// The fused passes (linear_nll_cuda.h) of the block of classes [begin, begin + n), from its
// (N, n) bf16 logits.
void fusedForwardBlock(const torch::Tensor& logits, const torch::Tensor& bias, const torch::Tensor& targets,
                       int64_t begin, torch::Tensor& lse, torch::Tensor& targetLogit) {
#ifdef XTRAP_WITH_CUDA_KERNELS
  fusedNllBlockForward(logits, biasBlock(bias, begin, logits.size(1)), targets, begin, lse, targetLogit);
#else
  (void)logits, (void)bias, (void)targets, (void)begin, (void)lse, (void)targetLogit;
  TORCH_CHECK(false, "linearNll's fused passes need a build with CUDA kernels");
#endif
}
torch::Tensor fusedGradientBlock(const torch::Tensor& logits, const torch::Tensor& bias, const torch::Tensor& targets,
                                 int64_t begin, const torch::Tensor& lse, const torch::Tensor& gradNll) {
#ifdef XTRAP_WITH_CUDA_KERNELS
  return fusedNllBlockGradient(logits, biasBlock(bias, begin, logits.size(1)), targets, begin, lse, gradNll);
#else
  (void)logits, (void)bias, (void)targets, (void)begin, (void)lse, (void)gradNll;
  TORCH_CHECK(false, "linearNll's fused passes need a build with CUDA kernels");
#endif
}

// Blocks of classes, not of rows: the backward then writes each block of dW once, and what
// accumulates over blocks is only dx (N x K).
struct LinearNllFunction : torch::autograd::Function<LinearNllFunction> {
  // fused: each block's passes are linear_nll.cu's (fusedPasses, decided once by linearNll);
  // keepLogits: with them, one block of every class whose bf16 logits are kept for the backward
  // instead of recomputed.
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, const torch::Tensor& weight,
                               const torch::Tensor& bias, const torch::Tensor& targets, int64_t blockClasses,
                               bool fused, bool keepLogits) {
    auto dtype = matmulDtype(x, weight);
    // Casting once here is what autocast does per matmul; the backward needs the same operands.
    auto xc = x.to(dtype), wc = weight.to(dtype);
    int64_t N = x.size(0), V = weight.size(0);
    auto f32 = x.options().dtype(torch::kFloat32);
    // Running log-sum-exp over the blocks, and each row's target logit once its block comes.
    auto lse = torch::full({N}, -std::numeric_limits<float>::infinity(), f32);
    auto targetLogit = torch::zeros({N}, f32);
    AutocastScope off(x.device(), torch::kFloat32);        // operands are cast already
    torch::Tensor kept = torch::empty({0}, xc.options());  // (N, V) with keepLogits
    for (int64_t begin = 0; begin < V; begin += blockClasses) {
      const int64_t n = std::min(blockClasses, V - begin);
      if (fused) {
        auto logits = xc.matmul(wc.narrow(0, begin, n).t());  // (N, n)
        fusedForwardBlock(logits, bias, targets, begin, lse, targetLogit);
        if (keepLogits) kept = logits;
        continue;
      }
      auto b = classBlock(xc, wc, bias, targets, begin, n);
      lse = torch::logaddexp(lse, b.logits.logsumexp(1));
      targetLogit = torch::where(b.inBlock, b.logits.gather(1, b.local).squeeze(1), targetLogit);
    }
    ctx->save_for_backward({xc, wc, bias, targets, lse, kept});
    ctx->saved_data["block_classes"] = blockClasses;
    ctx->saved_data["fused"] = fused;
    ctx->saved_data["x_dtype"] = static_cast<int64_t>(x.scalar_type());
    ctx->saved_data["w_dtype"] = static_cast<int64_t>(weight.scalar_type());
    return lse - targetLogit;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto saved = ctx->get_saved_variables();
    auto xc = saved[0], wc = saved[1], bias = saved[2], targets = saved[3], lse = saved[4], kept = saved[5];
    int64_t blockClasses = ctx->saved_data["block_classes"].toInt();
    bool hasBias = bias.numel() > 0;
    auto gradNll = grads[0].to(torch::kFloat32).unsqueeze(1);  // (N, 1)
    int64_t V = wc.size(0);
    AutocastScope off(xc.device(), torch::kFloat32);
    auto dx = torch::zeros(xc.sizes(), xc.options().dtype(torch::kFloat32));
    auto dw = torch::empty(wc.sizes(), wc.options().dtype(torch::kFloat32));
    auto db = hasBias ? torch::empty({V}, wc.options().dtype(torch::kFloat32)) : torch::Tensor();
    const bool fused = ctx->saved_data["fused"].toBool();
    for (int64_t begin = 0; begin < V; begin += blockClasses) {
      int64_t n = std::min(blockClasses, V - begin);
      // d nll / d logits = softmax - onehot(target), times each row's incoming gradient, in the
      // compute dtype: what autograd through `.to(float32)` hands the matmuls.
      torch::Tensor gc;  // (N, n)
      if (fused) {
        auto logits = kept.numel() > 0 ? kept : xc.matmul(wc.narrow(0, begin, n).t());  // (N, n)
        gc = fusedGradientBlock(logits, bias, targets, begin, lse, gradNll.squeeze(1).contiguous());
        // The bias gradient sums the bf16 gradient the matmuls take, in float32.
        if (hasBias) db.narrow(0, begin, n).copy_(gc.sum(0, /*keepdim=*/false, torch::kFloat32));
      } else {
        auto b = classBlock(xc, wc, bias, targets, begin, n);
        auto g = (b.logits - lse.unsqueeze(1)).exp_();
        g.scatter_add_(1, b.local, -b.inBlock.to(torch::kFloat32).unsqueeze(1));
        g.mul_(gradNll);  // (N, n) float32
        if (hasBias) db.narrow(0, begin, n).copy_(g.sum(0));
        gc = g.to(xc.scalar_type());
      }
      dw.narrow(0, begin, n).copy_(gc.t().matmul(xc));
      dx.add_(gc.matmul(wc.narrow(0, begin, n)));
    }
    auto xDtype = static_cast<at::ScalarType>(ctx->saved_data["x_dtype"].toInt());
    auto wDtype = static_cast<at::ScalarType>(ctx->saved_data["w_dtype"].toInt());
    auto dBias = hasBias ? db.to(bias.scalar_type()) : torch::Tensor();
    // x, weight, bias; none for targets, blockClasses, fused and keepLogits.
    return {dx.to(xDtype), dw.to(wDtype), dBias, torch::Tensor(), torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor linearNll(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias,
                        const torch::Tensor& targets, int64_t maxBlockLogits) {
  const int64_t N = x.size(0), V = weight.size(0);
  // Kept logits: the default blocks, the fused passes, a backward to come, and few enough logits.
  const bool backward = torch::GradMode::is_enabled() &&
                        (x.requires_grad() || weight.requires_grad() || (bias.defined() && bias.requires_grad()));
  const bool fused = fusedPasses(x, matmulDtype(x, weight));
  const bool keepLogits = maxBlockLogits <= 0 && backward && fused && N * V <= kMaxKeptLogitsCuda;
  if (maxBlockLogits <= 0) maxBlockLogits = x.is_cuda() ? kMaxBlockLogitsCuda : kMaxBlockLogits;
  int64_t blockClasses = keepLogits ? V : std::max<int64_t>(1, maxBlockLogits / std::max<int64_t>(1, N));
  // LibTorch 1.13's Function::apply takes no undefined tensor: "no bias" is an empty one inside.
  auto noBias = torch::empty({0}, weight.options());
  return LinearNllFunction::apply(x, weight, bias.defined() ? bias : noBias, targets, blockClasses, fused, keepLogits);
}

}  // namespace xtrap
