#include "model/embedding_dropout.h"

#include "model/fast_dropout.h"

#ifdef XTRAP_WITH_CUDA_KERNELS
#include "model/embedding_dropout_cuda.h"
#endif

namespace xtrap {

torch::Tensor embeddingDropout(const torch::Tensor& x, double scale, const torch::Tensor& positions, double p,
                               bool training, bool fused) {
#ifdef XTRAP_WITH_CUDA_KERNELS
  if (fused && fusedEmbeddingDropoutTakes(x, positions))
    return fusedEmbeddingDropout(x, scale, positions, training ? p : 0.0);
#else
  (void)fused;
#endif
  auto y = scale != 1.0 ? x * scale : x;
  if (positions.defined()) y = y + positions;
  return fastDropout(y, p, training);
}

}  // namespace xtrap
