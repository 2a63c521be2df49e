#include "model/position/linear_bias_attention_cuda.h"

#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <cstdint>
#include <limits>

#include "cuda/cuda_status_torch.h"
#include "cuda/heads_view_torch.h"
#include "cuda/rng_state_torch.h"
#include "model/position/linear_bias_attention.cuh"

namespace xtrap {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

uint64_t headMask(const std::vector<bool>& flags) {
  uint64_t mask = 0;
  for (size_t h = 0; h < flags.size(); ++h)
    if (flags[h]) mask |= uint64_t(1) << h;
  return mask;
}

// Inputs: q, k, v (B, H, T, D) bf16; slopePast, slopeFuture, firstTokenBias (H) float32 on the same
// GPU (firstTokenBias all zeros and ignored unless hasFirstTokenBias); then the spec's constants,
// the backward's scheme (a cuda::BackwardScheme), whether a bias parameter will get a gradient,
// whether both passes skip negligible pairs (ForwardArgs::tileBounds) and their tile products (a
// cuda::TileProducts).
struct FusedLinearBiasAttention : torch::autograd::Function<FusedLinearBiasAttention> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& q, const torch::Tensor& k,
                               const torch::Tensor& v, const torch::Tensor& slopePast, const torch::Tensor& slopeFuture,
                               const torch::Tensor& firstTokenBias, int64_t blockPast, int64_t blockFuture,
                               double futureShift, bool hasFirstTokenBias, bool causal, double scale, double dropout,
                               int64_t backwardScheme, bool biasGrads, bool skipNegligible, int64_t products) {
    c10::cuda::CUDAGuard guard(q.device());
    const int64_t B = q.size(0), H = q.size(1), T = q.size(2), D = q.size(3);
    auto o = torch::empty({B, H, T, D}, q.options());                        // (B, H, T, D)
    auto lse = torch::empty({B, H, T}, q.options().dtype(torch::kFloat32));  // (B, H, T)

    cuda::ForwardArgs a;
    a.shape = {int(B), int(H), int(T), int(D)};
    a.q = viewOf(q), a.k = viewOf(k), a.v = viewOf(v), a.o = viewOf(o);
    a.lse = lse.data_ptr<float>();
    a.bias = {slopePast.data_ptr<float>(),
              slopeFuture.data_ptr<float>(),
              hasFirstTokenBias ? firstTokenBias.data_ptr<float>() : nullptr,
              uint64_t(blockPast),
              uint64_t(blockFuture),
              float(futureShift),
              causal};
    a.scale = float(scale), a.dropout = float(dropout);
    // Dropout's mask from the default CUDA generator's (seed, offset), which the kernel reads when it
    // runs (values, or in a CUDA graph the graph's pointers) and records for the backward.
    torch::Tensor resolvedRng;  // (2) int64 (seed, offset) or undefined
    if (dropout > 0) {
      a.rng = drawRngState(q.device());
      resolvedRng = torch::empty({2}, q.options().dtype(torch::kInt64));
      a.resolvedRng = resolvedRng.data_ptr<int64_t>();
    }
    a.products = cuda::TileProducts(products);
    // The AtomicDq backward's bias gradients are centred on the rows' weights, which only the
    // forward can sum.
    torch::Tensor rowWeights;  // (3, B, H, T) or undefined
    if (cuda::BackwardScheme(backwardScheme) == cuda::BackwardScheme::AtomicDq && biasGrads) {
      rowWeights = torch::empty({3, B, H, T}, q.options().dtype(torch::kFloat32));
      a.rowWeights = rowWeights.data_ptr<float>();
    }
    torch::Tensor tileBounds;  // the kernel's scratch (linearBiasAttentionTileBoundsFloats) or undefined
    if (skipNegligible) {
      tileBounds = torch::empty({int64_t(cuda::linearBiasAttentionTileBoundsFloats(a.shape))},
                                q.options().dtype(torch::kFloat32));
      a.tileBounds = tileBounds.data_ptr<float>();
    }
    checkCudaStatus(cuda::linearBiasAttentionForward(a, c10::cuda::getCurrentCUDAStream().stream()),
                    "fused ALiBi attention forward");

    ctx->save_for_backward(
        {q, k, v, o, lse, slopePast, slopeFuture, firstTokenBias, rowWeights, tileBounds, resolvedRng});
    ctx->saved_data["blockPast"] = blockPast;
    ctx->saved_data["blockFuture"] = blockFuture;
    ctx->saved_data["futureShift"] = futureShift;
    ctx->saved_data["hasFirstTokenBias"] = hasFirstTokenBias;
    ctx->saved_data["causal"] = causal;
    ctx->saved_data["scale"] = scale;
    ctx->saved_data["dropout"] = dropout;
    ctx->saved_data["backwardScheme"] = backwardScheme;
    ctx->saved_data["products"] = products;
    return o;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto saved = ctx->get_saved_variables();
    const auto &q = saved[0], &k = saved[1], &v = saved[2], &o = saved[3], &lse = saved[4];
    const auto &slopePast = saved[5], &slopeFuture = saved[6], &firstTokenBias = saved[7], &rowWeights = saved[8];
    const auto &tileBounds = saved[9], &resolvedRng = saved[10];
    c10::cuda::CUDAGuard guard(q.device());
    const int64_t B = q.size(0), H = q.size(1), T = q.size(2), D = q.size(3);
    const bool hasFirstTokenBias = ctx->saved_data["hasFirstTokenBias"].toBool();
    auto dO = readable(grads[0].to(q.scalar_type()));
    auto dq = torch::empty({B, H, T, D}, q.options()), dk = torch::empty_like(dq), dv = torch::empty_like(dq);
    auto floats = q.options().dtype(torch::kFloat32);
    torch::Tensor dSlopePast, dSlopeFuture, dFirstTokenBias;
    if (ctx->needs_input_grad(3)) dSlopePast = torch::empty({H}, floats);
    if (ctx->needs_input_grad(4)) dSlopeFuture = torch::empty({H}, floats);
    if (hasFirstTokenBias && ctx->needs_input_grad(5)) dFirstTokenBias = torch::empty({H}, floats);
    auto pointer = [](torch::Tensor& t) { return t.defined() ? t.data_ptr<float>() : nullptr; };

    cuda::BackwardArgs a;
    a.shape = {int(B), int(H), int(T), int(D)};
    a.q = viewOf(q), a.k = viewOf(k), a.v = viewOf(v), a.o = viewOf(o), a.dO = viewOf(dO);
    a.lse = lse.data_ptr<float>();
    a.dq = viewOf(dq), a.dk = viewOf(dk), a.dv = viewOf(dv);
    a.dSlopePast = pointer(dSlopePast), a.dSlopeFuture = pointer(dSlopeFuture);
    a.dFirstTokenBias = pointer(dFirstTokenBias);
    a.bias = {slopePast.data_ptr<float>(),
              slopeFuture.data_ptr<float>(),
              hasFirstTokenBias ? firstTokenBias.data_ptr<float>() : nullptr,
              uint64_t(ctx->saved_data["blockPast"].toInt()),
              uint64_t(ctx->saved_data["blockFuture"].toInt()),
              float(ctx->saved_data["futureShift"].toDouble()),
              ctx->saved_data["causal"].toBool()};
    a.scale = float(ctx->saved_data["scale"].toDouble());
    a.dropout = float(ctx->saved_data["dropout"].toDouble());
    if (a.dropout > 0) a.rng = savedRngState(resolvedRng);
    a.scheme = cuda::BackwardScheme(ctx->saved_data["backwardScheme"].toInt());
    a.products = cuda::TileProducts(ctx->saved_data["products"].toInt());
    a.rowWeights = rowWeights.defined() ? rowWeights.data_ptr<float>() : nullptr;
    a.tileBounds = tileBounds.defined() ? tileBounds.data_ptr<float>() : nullptr;
    auto workspace =
        torch::empty({int64_t(cuda::linearBiasAttentionBackwardWorkspace(a))}, q.options().dtype(torch::kUInt8));
    checkCudaStatus(
        cuda::linearBiasAttentionBackward(a, workspace.data_ptr(), c10::cuda::getCurrentCUDAStream().stream()),
        "fused ALiBi attention backward");
    // One gradient per forward input: the 6 tensors, then none for the 11 constants.
    return {dq, dk, dv, dSlopePast, dSlopeFuture, dFirstTokenBias, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}};
  }
};

}  // namespace

bool fusedLinearBiasAttentionTakes(int64_t heads, int64_t headDim, double dropout, torch::Device device) {
  if (!device.is_cuda() || heads > std::numeric_limits<int>::max() || headDim > std::numeric_limits<int>::max())
    return false;
  return cuda::linearBiasAttentionCheck({1, int(heads), 1, int(headDim)}, float(dropout)) == nullptr &&
         cuda::linearBiasAttentionDeviceCheck(device.has_index() ? device.index() : c10::cuda::current_device(),
                                              int(headDim)) == nullptr;
}

std::string fusedLinearBiasAttentionUnsupported(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                                double dropout) {
  for (const auto* t : {&q, &k, &v}) {
    if (!t->is_cuda()) return "fused ALiBi attention runs on CUDA tensors only";
    if (t->scalar_type() != torch::kBFloat16) return "fused ALiBi attention takes bfloat16 q, k, v";
    if (t->dim() != 4 || t->sizes() != q.sizes())
      return "fused ALiBi attention takes q, k, v of one (B, H, T, D) shape";
    if (t->device() != q.device()) return "fused ALiBi attention takes q, k, v on one GPU";
  }
  cuda::AttentionShape shape{int(q.size(0)), int(q.size(1)), int(q.size(2)), int(q.size(3))};
  if (q.size(2) > std::numeric_limits<int>::max() / 2) return "fused ALiBi attention: sequence too long";
  const char* reason = cuda::linearBiasAttentionCheck(shape, float(dropout));
  if (!reason) reason = cuda::linearBiasAttentionDeviceCheck(q.get_device(), shape.D);
  return reason ? reason : "";
}

torch::Tensor fusedLinearBiasAttention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                       const LinearBias& bias, bool causal, double scale, double dropout,
                                       std::optional<cuda::BackwardScheme> backward, bool skipNegligible,
                                       cuda::TileProducts products) {
  std::string reason = fusedLinearBiasAttentionUnsupported(q, k, v, dropout);
  TORCH_CHECK(reason.empty(), reason);
  const char* productsReason = cuda::linearBiasAttentionProductsCheck(q.get_device(), products);
  TORCH_CHECK(productsReason == nullptr, productsReason);
  const LinearBiasSpec& spec = bias.spec();
  const int64_t H = q.size(1);
  TORCH_CHECK(spec.heads() == H, "fused ALiBi attention: the spec has ", spec.heads(), " heads, q has ", H);
  // The kernel gives pairs touching position 0 the first-token bias before it applies causality:
  // a causal call with it would let query 0 see the future (makeLinearBiasSpec never makes one).
  TORCH_CHECK(!(causal && spec.hasFirstTokenBias), "fused ALiBi attention: a first-token bias is for encoders only");
  auto onDevice = [&](const torch::Tensor& t) { return t.to(q.device(), torch::kFloat32).contiguous(); };
  torch::Tensor slopePast = onDevice(bias.slopePast()), slopeFuture = onDevice(bias.slopeFuture());
  torch::Tensor firstTokenBias =
      spec.hasFirstTokenBias ? onDevice(bias.firstTokenBias()) : torch::zeros({H}, q.options().dtype(torch::kFloat32));
  // Whether a bias parameter will get a gradient: asked here, as the Function's forward runs with
  // grad mode off, and its context cannot say where it is off here too (evaluation).
  const bool biasGrads = torch::GradMode::is_enabled() &&
                         (slopePast.requires_grad() || slopeFuture.requires_grad() || firstTokenBias.requires_grad());
  const cuda::BackwardScheme scheme =
      backward.value_or(biasGrads ? cuda::BackwardScheme::TwoPass : cuda::BackwardScheme::AtomicDq);
  return FusedLinearBiasAttention::apply(readable(q), readable(k), readable(v), slopePast, slopeFuture, firstTokenBias,
                                         int64_t(headMask(spec.blockPast)), int64_t(headMask(spec.blockFuture)),
                                         spec.futureShift, spec.hasFirstTokenBias, causal, scale, dropout,
                                         int64_t(scheme), biasGrads, skipNegligible, int64_t(products));
}

std::vector<torch::Tensor> probeWarpgroupProducts(const torch::Tensor& q, const torch::Tensor& k,
                                                  const torch::Tensor& v, const torch::Tensor& p) {
  const int64_t D = q.dim() == 2 ? q.size(1) : 0;
  TORCH_CHECK(D == 64 || D == 128, "warpgroup products probe: q must be (64, 64) or (64, 128)");
  const std::vector<int64_t> tile = {64, D}, square = {64, 64};
  for (const auto* t : {&q, &k, &v, &p}) {
    TORCH_CHECK(t->is_cuda() && t->device() == q.device() && t->scalar_type() == torch::kBFloat16,
                "warpgroup products probe: bfloat16 tensors on one GPU");
    TORCH_CHECK(t->sizes() == torch::IntArrayRef(t == &p ? square : tile),
                "warpgroup products probe: q, k, v (64, D) and p (64, 64)");
  }
  const char* reason = cuda::linearBiasAttentionProductsCheck(q.get_device(), cuda::TileProducts::WarpgroupMma);
  TORCH_CHECK(reason == nullptr, reason);
  const c10::cuda::CUDAGuard guard(q.device());
  const auto f32 = q.options().dtype(torch::kFloat32);
  std::vector<torch::Tensor> out = {torch::empty({64, 64}, f32), torch::empty({64, 64}, f32),
                                    torch::empty({64, D}, f32), torch::empty({64, D}, f32)};
  const torch::Tensor qc = q.contiguous(), kc = k.contiguous(), vc = v.contiguous(), pc = p.contiguous();
  cuda::WarpgroupProductsProbe probe;
  probe.D = int(D), probe.q = qc.data_ptr(), probe.k = kc.data_ptr(), probe.v = vc.data_ptr(), probe.p = pc.data_ptr();
  probe.s = out[0].data_ptr<float>(), probe.sFromZero = out[1].data_ptr<float>(), probe.o = out[2].data_ptr<float>();
  probe.dq = out[3].data_ptr<float>();
  checkCudaStatus(cuda::linearBiasAttentionProbeWarpgroupProducts(probe, c10::cuda::getCurrentCUDAStream().stream()),
                  "fused ALiBi attention warpgroup products probe");
  return out;
}

}  // namespace xtrap
