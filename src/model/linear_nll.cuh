#pragma once
// The float32 work of linearNll (linear_nll.h) on one block of classes, on CUDA, from the block's
// bf16 logits: one pass each, where LibTorch's operators take six over float32 copies.
// Forward: the block's log-sum-exp folded into each row's running one, and the target's logit.
// Backward: the logits' gradient (softmax - onehot(target)) times each row's incoming gradient,
// written in bf16, the dtype the weight and input gradients' matmuls take. On a 16,384-row step
// of WikiText-2's 33,278 words the operators read and write about 9 GB of float32 logits per
// step for this; the kernels read the bf16 logits once per pass and write bf16 once.
//
// A plain C++ API over raw device pointers (no LibTorch): the LibTorch glue is linear_nll_cuda.cpp.
// N = rows, n = classes in the block.
#include <cuda_runtime_api.h>

#include <cstdint>

namespace xtrap::cuda {

struct NllBlock {
  const void* logits = nullptr;      // (N, n) __nv_bfloat16, row stride `stride` elements
  int64_t rows = 0;                  // N
  int64_t classes = 0;               // n
  int64_t stride = 0;                // >= n
  const float* bias = nullptr;       // (n) added to the logits in float32, or nullptr
  const int64_t* targets = nullptr;  // (N) targets in [0, V): class target - begin of this block
  int64_t begin = 0;                 // the block's first class
};

// lse[r] = logaddexp(lse[r], log sum_c exp(logit[r, c] + bias[c])), and, for rows whose target
// lies in the block, targetLogit[r] = logit[r, target - begin] + bias[target - begin]; the other
// rows' targetLogit is left as it is. A NaN logit makes its row's lse NaN. float32 (N) each.
cudaError_t nllBlockForward(const NllBlock& block, float* lse, float* targetLogit, cudaStream_t stream);

// grad[r, c] = bf16((exp(logit[r, c] + bias[c] - lse[r]) - [c == target_r - begin]) * gradNll[r]),
// grad (N, n) contiguous __nv_bfloat16; lse and gradNll float32 (N).
cudaError_t nllBlockGradient(const NllBlock& block, const float* lse, const float* gradNll, void* grad,
                             cudaStream_t stream);

}  // namespace xtrap::cuda
