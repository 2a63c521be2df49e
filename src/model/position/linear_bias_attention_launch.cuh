#pragma once
// The host side of the fused ALiBi-family attention (linear_bias_attention.cu has the overview):
// the passes that the entry points of linear_bias_attention.cuh dispatch to, one .cu file each as
// FlashAttention's csrc has them, and what those files share to launch their kernels and report
// them (linearBiasAttentionKernelFacts).
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <utility>

#include "model/position/linear_bias_attention.cuh"
#include "model/position/linear_bias_attention_layout.cuh"
#include "model/position/linear_bias_tile.h"

namespace xtrap::cuda {
namespace linear_bias_passes {

// linear_bias_attention_forward.cu: the tile bounds and walks of negligible pairs where asked for,
// then the forward. Arguments checked by the caller.
cudaError_t forward(const ForwardArgs& args, cudaStream_t stream);
// linear_bias_attention_backward.cu: D_i (rowDot), the scheme's passes, the bias gradients' sum.
cudaError_t backward(const BackwardArgs& args, void* workspace, cudaStream_t stream);
// linear_bias_attention_backward_two_pass.cu, BackwardScheme::TwoPass: keyGrad, then queryGrad (dQ
// and the bias gradients' per-block partials, where asked for).
cudaError_t twoPassGrads(const BackwardArgs& args, const float* rowDot, double* partials, cudaStream_t stream);
// linear_bias_attention_backward_atomic_dq.cu, BackwardScheme::AtomicDq: keyGrad alone (dQ's adds
// into dqAccum, which it clears first, and the bias gradients' partials), then dQ's rounding.
cudaError_t atomicDqGrads(const BackwardArgs& args, const float* rowDot, float* dqAccum, double* partials,
                          cudaStream_t stream);
// linear_bias_attention_warpgroup_probe.cu: linearBiasAttentionProbeWarpgroupProducts' kernel.
cudaError_t probeWarpgroupProducts(const WarpgroupProductsProbe& probe, cudaStream_t stream);
// Each file's kernels in facts[0..kKernelFactsCount) (FactsSlot), for head dimension D, until one
// fails.
cudaError_t forwardKernelFacts(int D, KernelFacts* facts);
cudaError_t backwardKernelFacts(int D, KernelFacts* facts);
cudaError_t twoPassKernelFacts(int D, KernelFacts* facts);
cudaError_t atomicDqKernelFacts(int D, KernelFacts* facts);

}  // namespace linear_bias_passes

namespace {

Derived derive(const AttentionShape& shape, float dropout) {
  Derived dv;
  dv.threshold = tile::dropoutThreshold(dropout);
  dv.keepScale = dropout > 0.f ? 1.f / (1.f - dropout) : 1.f;
  dv.qTiles = ceilDiv(shape.T, kBr);
  return dv;
}

// Runs kernel on grid, kThreads threads a block, with smemBytes of dynamic shared memory; launch
// errors are returned. Through cudaLaunchKernelEx rather than <<<...>>>, which is not C++: the kernel
// files then also compile as plain C++, and tests/cuda_emulation runs its kernels on the CPU.
template <typename... Params, typename... Args>
cudaError_t launch(void (*kernel)(Params...), dim3 grid, size_t smemBytes, cudaStream_t stream, Args&&... args) {
  cudaLaunchConfig_t config = {};
  config.gridDim = grid;
  config.blockDim = dim3(kThreads);
  config.dynamicSmemBytes = smemBytes;
  config.stream = stream;
  return cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...);
}

template <typename Kernel>
cudaError_t allowSharedMemory(Kernel kernel, size_t bytes) {
  return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes));
}

bool wantsBiasGrads(const BackwardArgs& a) { return a.dSlopePast || a.dSlopeFuture || a.dFirstTokenBias; }

bool atomicDq(const BackwardArgs& a) { return a.scheme == BackwardScheme::AtomicDq; }

// The backward's workspace, in bytes from its start: rowDot (B, H, T) fp32 at 0, then with AtomicDq
// dqAccum (B, H, T rounded up to 64, D) fp32 (queryGradStripe), then with bias gradients the
// per-block partials of the kernel that sums them (TwoPass: queryGrad, AtomicDq: keyGrad),
// (B, H, tiles, 3) fp64.
struct WorkspaceLayout {
  size_t dqAccum = 0, partials = 0, bytes = 0;
};
WorkspaceLayout workspaceLayout(const BackwardArgs& a) {
  const AttentionShape& s = a.shape;
  const size_t heads = size_t(s.B) * s.H, tiles = heads * ceilDiv(s.T, kBr);  // tiles of all heads
  WorkspaceLayout w;
  w.dqAccum = align128(heads * s.T * sizeof(float));
  w.partials = w.dqAccum + (atomicDq(a) ? align128(tiles * kBr * s.D * sizeof(float)) : 0);
  w.bytes = w.partials + (wantsBiasGrads(a) ? align128(tiles * 3 * sizeof(double)) : 0);
  return w;
}

// Where each kernel's facts lie in linearBiasAttentionKernelFacts' array: kKernelFactsCount's order.
enum class FactsSlot : int {
  Forward,
  RowDot,
  KeyGrad,
  QueryGrad,
  QueryGradBias,
  KeyGradDq,
  KeyGradDqBias,
  RoundQueryGrad,
  ForwardWeights,
  TileBounds,
  TileWalks,
  ForwardWarpgroup,
  KeyGradWarpgroup,
  KeyGradDqWarpgroup,
  QueryGradWarpgroup,
  Count
};
static_assert(int(FactsSlot::Count) == kKernelFactsCount, "a slot for each kernel reported");

template <typename Kernel>
cudaError_t factsOf(Kernel kernel, const char* name, size_t dynamicBytes, KernelFacts& facts) {
  cudaFuncAttributes attributes;
  if (cudaError_t e = cudaFuncGetAttributes(&attributes, kernel); e != cudaSuccess) return e;
  if (dynamicBytes > 0)
    if (cudaError_t e = allowSharedMemory(kernel, dynamicBytes); e != cudaSuccess) return e;
  int blocks = 0;
  if (cudaError_t e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, kThreads, dynamicBytes);
      e != cudaSuccess)
    return e;
  facts = {name, attributes.numRegs, attributes.sharedSizeBytes + dynamicBytes, blocks};
  return cudaSuccess;
}

// Fills the slot of each kernel added, until one fails; `error` is then that failure.
struct FactsFiller {
  KernelFacts* facts;
  cudaError_t error = cudaSuccess;
  template <typename Kernel>
  void add(FactsSlot slot, Kernel kernel, const char* name, size_t dynamicBytes) {
    if (error == cudaSuccess) error = factsOf(kernel, name, dynamicBytes, facts[int(slot)]);
  }
};

}  // namespace
}  // namespace xtrap::cuda
