#include "model/add_norm_cuda.h"

#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "cuda/cuda_status_torch.h"
#include "model/add_norm.cuh"
#include "model/counter_dropout_torch.h"

namespace xtrap {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The arguments both passes share: shapes, dtypes, the LayerNorm's float32 weight and bias.
cuda::AddNormArgs sharedArgs(const torch::Tensor& out, const torch::Tensor& weight, const torch::Tensor& bias,
                             torch::ScalarType yDtype, torch::ScalarType normedDtype, double eps) {
  cuda::AddNormArgs a;
  a.cols = out.size(-1);
  a.rows = out.numel() / a.cols;
  a.yBf16 = yDtype == torch::kBFloat16;
  a.normedBf16 = normedDtype == torch::kBFloat16;
  a.weight = weight.data_ptr<float>();
  a.bias = bias.data_ptr<float>();
  a.eps = static_cast<float>(eps);
  return a;
}

// Inputs: x (..., C) float32, y (..., C) bf16 or float32, weight and bias (C); outputs out and normed.
struct FusedAddNorm : torch::autograd::Function<FusedAddNorm> {
  static variable_list forward(AutogradContext* ctx, const torch::Tensor& x, const torch::Tensor& y,
                               const torch::Tensor& weight, const torch::Tensor& bias, double eps, double p,
                               int64_t normedDtype) {
    c10::cuda::CUDAGuard guard(x.device());
    auto xc = x.contiguous(), yc = y.contiguous();
    auto w = weight.to(torch::kFloat32).contiguous(), b = bias.to(torch::kFloat32).contiguous();
    auto out = torch::empty_like(xc);                                                            // (..., C) float32
    auto normed = torch::empty(xc.sizes(), xc.options().dtype(torch::ScalarType(normedDtype)));  // (..., C)
    const int64_t C = xc.size(-1);
    auto mean = torch::empty({xc.numel() / C}, xc.options()), rstd = torch::empty_like(mean);  // (N) float32
    ForwardDropout drop = forwardDropout(p, x.device());
    cuda::AddNormArgs a = sharedArgs(out, w, b, yc.scalar_type(), torch::ScalarType(normedDtype), eps);
    a.x = xc.data_ptr<float>(), a.y = yc.data_ptr();
    a.dropout = drop.dropout;
    a.out = out.data_ptr<float>(), a.normed = normed.data_ptr();
    a.mean = mean.data_ptr<float>(), a.rstd = rstd.data_ptr<float>();
    checkCudaStatus(cuda::addNormForward(a, c10::cuda::getCurrentCUDAStream().stream()), "add & norm on CUDA, forward");
    // LibTorch 1.13 saves no undefined tensor: "no dropout" is an empty one.
    auto resolved = drop.resolved.defined() ? drop.resolved : torch::empty({0}, xc.options().dtype(torch::kInt64));
    ctx->save_for_backward({out, mean, rstd, w, b, resolved});
    ctx->saved_data["eps"] = eps;
    ctx->saved_data["p"] = p;
    ctx->saved_data["y_dtype"] = static_cast<int64_t>(y.scalar_type());
    ctx->saved_data["normed_dtype"] = normedDtype;
    ctx->saved_data["w_dtype"] = static_cast<int64_t>(weight.scalar_type());
    ctx->set_materialize_grads(false);
    return {out, normed};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto saved = ctx->get_saved_variables();
    const auto &out = saved[0], &mean = saved[1], &rstd = saved[2], &w = saved[3], &b = saved[4], &resolved = saved[5];
    c10::cuda::CUDAGuard guard(out.device());
    const auto yDtype = torch::ScalarType(ctx->saved_data["y_dtype"].toInt());
    const auto normedDtype = torch::ScalarType(ctx->saved_data["normed_dtype"].toInt());
    const double p = ctx->saved_data["p"].toDouble();
    // Undefined gradients: the residual not used again (nullptr), normed not used (zeros).
    auto dOut = grads[0].defined() ? grads[0].to(torch::kFloat32).contiguous() : torch::Tensor();
    auto dNormed = grads[1].defined() ? grads[1].to(normedDtype).contiguous()
                                      : torch::zeros(out.sizes(), out.options().dtype(normedDtype));
    auto dX = torch::empty_like(out), dY = torch::empty(out.sizes(), out.options().dtype(yDtype));  // (..., C)
    auto dW = torch::empty_like(w), dB = torch::empty_like(b);                                      // (C)
    cuda::AddNormBackwardArgs a;
    a.forward = sharedArgs(out, w, b, yDtype, normedDtype, ctx->saved_data["eps"].toDouble());
    a.forward.out = const_cast<float*>(out.data_ptr<float>());
    a.forward.mean = const_cast<float*>(mean.data_ptr<float>());
    a.forward.rstd = const_cast<float*>(rstd.data_ptr<float>());
    a.forward.dropout = backwardDropout(p, resolved);
    auto partial = torch::empty({cuda::addNormPartialFloats(a.forward.rows, a.forward.cols)}, out.options());
    a.dOut = dOut.defined() ? dOut.data_ptr<float>() : nullptr;
    a.dNormed = dNormed.data_ptr();
    a.dX = dX.data_ptr<float>(), a.dY = dY.data_ptr();
    a.dWeight = dW.data_ptr<float>(), a.dBias = dB.data_ptr<float>(), a.partial = partial.data_ptr<float>();
    checkCudaStatus(cuda::addNormBackward(a, c10::cuda::getCurrentCUDAStream().stream()),
                    "add & norm on CUDA, backward");
    const auto wDtype = torch::ScalarType(ctx->saved_data["w_dtype"].toInt());
    // x, y, weight, bias; none for eps, p and the dtype.
    return {dX, dY, dW.to(wDtype), dB.to(wDtype), torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

bool fusedAddNormTakes(const torch::Tensor& x, const torch::Tensor& y) {
  if (!x.is_cuda() || x.scalar_type() != torch::kFloat32 || x.sizes() != y.sizes() || x.dim() < 1 ||
      x.device() != y.device() || (y.scalar_type() != torch::kBFloat16 && y.scalar_type() != torch::kFloat32))
    return false;
  return x.numel() > 0 && x.numel() < (int64_t(1) << 32) && at::cuda::getDeviceProperties(x.get_device())->major >= 8;
}

AddNormed fusedAddNorm(const torch::Tensor& x, const torch::Tensor& y, const torch::Tensor& weight,
                       const torch::Tensor& bias, double eps, double p, torch::ScalarType normedDtype) {
  TORCH_CHECK(fusedAddNormTakes(x, y), "add & norm on CUDA takes a float32 residual and a bf16 or float32 branch ",
              "of its shape on a GPU of compute capability 8.0+");
  TORCH_CHECK(weight.numel() == x.size(-1) && bias.numel() == x.size(-1) && weight.device() == x.device() &&
                  bias.device() == x.device(),
              "add & norm on CUDA: the LayerNorm's weight and bias must be (C) on x's GPU");
  auto outs = FusedAddNorm::apply(x, y, weight, bias, eps, p, static_cast<int64_t>(normedDtype));
  return {outs[0], outs[1]};
}

}  // namespace xtrap
