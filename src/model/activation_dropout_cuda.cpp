#include "model/activation_dropout_cuda.h"

#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "cuda/cuda_status_torch.h"
#include "model/activation_dropout.cuh"
#include "model/counter_dropout_torch.h"

namespace xtrap {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

cuda::ActivationDropoutArgs argsOf(const torch::Tensor& h, int64_t activation) {
  cuda::ActivationDropoutArgs a;
  a.n = h.numel();
  a.kind = static_cast<cuda::ActivationKind>(activation);
  a.bf16 = h.scalar_type() == torch::kBFloat16;
  a.h = h.data_ptr();
  return a;
}

// Inputs: h (..., F) bf16 or float32; the activation (Activation as an integer) and p.
struct FusedActivationDropout : torch::autograd::Function<FusedActivationDropout> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& h, int64_t activation, double p) {
    c10::cuda::CUDAGuard guard(h.device());
    auto hc = h.contiguous();
    auto out = torch::empty_like(hc);  // (..., F)
    ForwardDropout drop = forwardDropout(p, h.device());
    cuda::ActivationDropoutArgs a = argsOf(hc, activation);
    a.dropout = drop.dropout;
    a.out = out.data_ptr();
    checkCudaStatus(cuda::activationDropoutForward(a, c10::cuda::getCurrentCUDAStream().stream()),
                    "activation + dropout on CUDA, forward");
    // LibTorch 1.13 saves no undefined tensor: "no dropout" is an empty one.
    ctx->save_for_backward(
        {hc, drop.resolved.defined() ? drop.resolved : torch::empty({0}, h.options().dtype(torch::kInt64))});
    ctx->saved_data["activation"] = activation;
    ctx->saved_data["p"] = p;
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto saved = ctx->get_saved_variables();
    const auto &h = saved[0], &resolved = saved[1];
    c10::cuda::CUDAGuard guard(h.device());
    auto dOut = grads[0].to(h.scalar_type()).contiguous();
    auto dH = torch::empty_like(h);
    cuda::ActivationDropoutArgs a = argsOf(h, ctx->saved_data["activation"].toInt());
    a.dropout = backwardDropout(ctx->saved_data["p"].toDouble(), resolved);
    a.dOut = dOut.data_ptr(), a.dH = dH.data_ptr();
    checkCudaStatus(cuda::activationDropoutBackward(a, c10::cuda::getCurrentCUDAStream().stream()),
                    "activation + dropout on CUDA, backward");
    return {dH, torch::Tensor(), torch::Tensor()};  // h; none for the activation and p
  }
};

}  // namespace

bool fusedActivationDropoutTakes(const torch::Tensor& h) {
  if (!h.is_cuda() || (h.scalar_type() != torch::kBFloat16 && h.scalar_type() != torch::kFloat32)) return false;
  return h.numel() > 0 && h.numel() < (int64_t(1) << 32) && at::cuda::getDeviceProperties(h.get_device())->major >= 8;
}

torch::Tensor fusedActivationDropout(const torch::Tensor& h, Activation activation, double p) {
  TORCH_CHECK(fusedActivationDropoutTakes(h),
              "activation + dropout on CUDA takes bf16 or float32 on a GPU of compute capability 8.0+");
  // The kernel's kinds are Activation's, in the same order.
  static_assert(int(Activation::GeluTanh) == int(cuda::ActivationKind::GeluTanh) &&
                int(Activation::Relu) == int(cuda::ActivationKind::Relu));
  return FusedActivationDropout::apply(h, static_cast<int64_t>(activation), p);
}

}  // namespace xtrap
