#include "model/embedding_dropout_cuda.h"

#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "cuda/cuda_status_torch.h"
#include "model/counter_dropout_torch.h"
#include "model/embedding_dropout.cuh"

namespace xtrap {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

cuda::EmbeddingDropoutArgs argsOf(const torch::Tensor& x, double scale, const torch::Tensor& positions) {
  cuda::EmbeddingDropoutArgs a;
  a.batch = x.size(0), a.length = x.size(1), a.cols = x.size(2);
  a.scale = static_cast<float>(scale);
  a.positions = positions.numel() > 0 ? positions.data_ptr<float>() : nullptr;
  return a;
}

// Inputs: x (B, T, C), positions (T, C) or empty (none), both float32; scale and p.
struct FusedEmbeddingDropout : torch::autograd::Function<FusedEmbeddingDropout> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, const torch::Tensor& positions,
                               double scale, double p) {
    c10::cuda::CUDAGuard guard(x.device());
    auto xc = x.contiguous(), pc = positions.contiguous();
    auto out = torch::empty_like(xc);  // (B, T, C)
    ForwardDropout drop = forwardDropout(p, x.device());
    cuda::EmbeddingDropoutArgs a = argsOf(xc, scale, pc);
    a.dropout = drop.dropout;
    a.embedding = xc.data_ptr<float>(), a.out = out.data_ptr<float>();
    checkCudaStatus(cuda::embeddingDropoutForward(a, c10::cuda::getCurrentCUDAStream().stream()),
                    "embedding dropout on CUDA, forward");
    // LibTorch 1.13 saves no undefined tensor: "no dropout" is an empty one.
    ctx->save_for_backward(
        {drop.resolved.defined() ? drop.resolved : torch::empty({0}, x.options().dtype(torch::kInt64))});
    ctx->saved_data["shape"] = xc.sizes().vec();
    ctx->saved_data["scale"] = scale;
    ctx->saved_data["p"] = p;
    ctx->saved_data["positions"] = positions.numel() > 0;
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto resolved = ctx->get_saved_variables()[0];
    auto dOut = grads[0].to(torch::kFloat32).contiguous();  // (B, T, C)
    c10::cuda::CUDAGuard guard(dOut.device());
    const bool positionGrad = ctx->saved_data["positions"].toBool() && ctx->needs_input_grad(1);
    auto dX = torch::empty_like(dOut);
    auto dPositions = positionGrad ? torch::empty({dOut.size(1), dOut.size(2)}, dOut.options()) : torch::Tensor();
    cuda::EmbeddingDropoutArgs a = argsOf(dOut, ctx->saved_data["scale"].toDouble(), torch::Tensor());
    a.dropout = backwardDropout(ctx->saved_data["p"].toDouble(), resolved);
    a.dOut = dOut.data_ptr<float>(), a.dEmbedding = dX.data_ptr<float>();
    a.dPositions = positionGrad ? dPositions.data_ptr<float>() : nullptr;
    checkCudaStatus(cuda::embeddingDropoutBackward(a, c10::cuda::getCurrentCUDAStream().stream()),
                    "embedding dropout on CUDA, backward");
    return {dX, dPositions, torch::Tensor(), torch::Tensor()};  // x, positions; none for scale and p
  }
};

}  // namespace

bool fusedEmbeddingDropoutTakes(const torch::Tensor& x, const torch::Tensor& positions) {
  if (!x.is_cuda() || x.scalar_type() != torch::kFloat32 || x.dim() != 3) return false;
  if (positions.defined() && (positions.scalar_type() != torch::kFloat32 || positions.device() != x.device() ||
                              positions.dim() != 2 || positions.size(0) != x.size(1) || positions.size(1) != x.size(2)))
    return false;
  return x.numel() > 0 && x.numel() < (int64_t(1) << 32) && at::cuda::getDeviceProperties(x.get_device())->major >= 8;
}

torch::Tensor fusedEmbeddingDropout(const torch::Tensor& x, double scale, const torch::Tensor& positions, double p) {
  TORCH_CHECK(fusedEmbeddingDropoutTakes(x, positions), "embedding dropout on CUDA takes (B, T, C) float32 and ",
              "(T, C) float32 positions on a GPU of compute capability 8.0+");
  // LibTorch 1.13's Function::apply takes no undefined tensor: "no positions" is an empty one.
  return FusedEmbeddingDropout::apply(x, positions.defined() ? positions : torch::empty({0}, x.options()), scale, p);
}

}  // namespace xtrap
