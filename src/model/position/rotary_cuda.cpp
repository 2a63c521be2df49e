#include "model/position/rotary_cuda.h"

#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <limits>

#include "cuda/heads_view_torch.h"
#include "model/position/rotary.cuh"

namespace xtrap {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// x (B, H, T, D) bf16 rotated by the tables (transposed: by minus the angles, the factor first).
torch::Tensor rotateOnDevice(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin, double factor,
                             bool transposed) {
  c10::cuda::CUDAGuard guard(x.device());
  auto out = torch::empty(x.sizes(), x.options().dtype(torch::kBFloat16));  // (B, H, T, D) contiguous
  const torch::Tensor in = readable(x.to(torch::kBFloat16));
  cuda::RotaryArgs a;
  a.x = viewOf(in), a.out = out.data_ptr();
  a.B = int(x.size(0)), a.H = int(x.size(1)), a.T = int(x.size(2)), a.D = int(x.size(3));
  a.cos = cos.data_ptr<float>(), a.sin = sin.data_ptr<float>();
  a.factor = float(factor), a.transposed = transposed;
  const cudaError_t status = cuda::rotate(a, c10::cuda::getCurrentCUDAStream().stream());
  TORCH_CHECK(status == cudaSuccess, "rotary on CUDA: ", cudaGetErrorString(status));
  return out;
}

// Inputs: x (B, H, T, D) bf16, the (T, D/2) float32 cos and sin tables, the attention factor.
struct FusedRotary : torch::autograd::Function<FusedRotary> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, const torch::Tensor& cos,
                               const torch::Tensor& sin, double factor) {
    ctx->save_for_backward({cos, sin});
    ctx->saved_data["factor"] = factor;
    return rotateOnDevice(x, cos, sin, factor, false);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto saved = ctx->get_saved_variables();
    // One gradient per forward input: x's, then none for the tables (constants) and the factor.
    return {rotateOnDevice(grads[0], saved[0], saved[1], ctx->saved_data["factor"].toDouble(), true), {}, {}, {}};
  }
};

}  // namespace

bool fusedRotaryTakes(const torch::Tensor& x) {
  if (!x.is_cuda() || x.scalar_type() != torch::kBFloat16 || x.dim() != 4) return false;
  for (int64_t d = 0; d < 4; ++d)
    if (x.size(d) > std::numeric_limits<int>::max()) return false;
  cuda::RotaryArgs shape;  // the kernel's own rule for the shape
  shape.B = int(x.size(0)), shape.H = int(x.size(1)), shape.T = int(x.size(2)), shape.D = int(x.size(3));
  return cuda::rotaryCheck(shape) == nullptr && at::cuda::getDeviceProperties(x.get_device())->major >= 8;
}

torch::Tensor fusedRotary(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin, double factor) {
  TORCH_CHECK(fusedRotaryTakes(x), "rotary on CUDA takes (B, H, T, D) bfloat16 on a GPU of compute capability 8.0+, ",
              "D a multiple of 16");
  const int64_t T = x.size(2), half = x.size(3) / 2;
  auto table = [&](const torch::Tensor& t) {
    TORCH_CHECK(t.dim() == 2 && t.size(0) == T && t.size(1) == half, "rotary on CUDA: the tables must be (T, D/2)");
    return t.to(x.device(), torch::kFloat32).contiguous();
  };
  return FusedRotary::apply(x, table(cos), table(sin), factor);
}

}  // namespace xtrap
