#include "model/add_norm.h"

#include "model/fast_dropout.h"
#include "util/torch_compat.h"

#ifdef XTRAP_WITH_CUDA_KERNELS
#include "model/add_norm_cuda.h"
#endif

namespace xtrap {

AddNormed addNorm(const torch::Tensor& x, const torch::Tensor& y, const Norm& norm, double p, bool training, bool fused,
                  bool matmulInput) {
#ifdef XTRAP_WITH_CUDA_KERNELS
  if (fused && norm && norm->kind == NormKind::Layer && fusedAddNormTakes(x, y)) {
    const auto type = x.device().type();
    // What the next matmul takes: autocast's dtype, else the LayerNorm's own float32.
    const auto normedDtype =
        matmulInput && compat::autocastEnabled(type) ? compat::autocastDtype(type) : torch::kFloat32;
    return fusedAddNorm(x, y, norm->weight, norm->bias, norm->eps, training ? p : 0.0, normedDtype);
  }
#else
  (void)fused, (void)matmulInput;
#endif
  auto out = x + fastDropout(y, p, training);
  return {out, norm ? norm.ptr()->forward(out) : torch::Tensor()};
}

}  // namespace xtrap
