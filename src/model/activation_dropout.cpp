#include "model/activation_dropout.h"

#include "model/fast_dropout.h"

#ifdef XTRAP_WITH_CUDA_KERNELS
#include "model/activation_dropout_cuda.h"
#endif

namespace xtrap {

torch::Tensor activationDropout(const torch::Tensor& h, Activation activation, double p, bool training, bool fused) {
#ifdef XTRAP_WITH_CUDA_KERNELS
  if (fused && activation != Activation::Silu && fusedActivationDropoutTakes(h))
    return fusedActivationDropout(h, activation, training ? p : 0.0);
#else
  (void)fused;
#endif
  auto a = activation == Activation::Relu       ? torch::relu(h)
           : activation == Activation::GeluTanh ? torch::gelu(h, "tanh")
           : activation == Activation::Silu     ? torch::silu(h)
                                                : torch::gelu(h);
  return fastDropout(a, p, training);
}

}  // namespace xtrap
