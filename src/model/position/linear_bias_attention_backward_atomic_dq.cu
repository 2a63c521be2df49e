// The fused ALiBi-family attention's backward in BackwardScheme::AtomicDq (linear_bias_attention.cu
// has the overview): keyGradKernel (linear_bias_attention_key_grad.cuh) alone, adding each pair's
// dS K to an fp32 dQ and summing the bias gradients, then roundQueryGradKernel.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/bf16_words.cuh"
#include "model/position/linear_bias_attention.cuh"
#include "model/position/linear_bias_attention_key_grad.cuh"
#include "model/position/linear_bias_attention_launch.cuh"
#include "model/position/linear_bias_attention_layout.cuh"
#include "model/position/linear_bias_attention_products.cuh"
#include "model/position/linear_bias_attention_tile_block.cuh"

namespace xtrap::cuda {
namespace {

// AtomicDq's last step: dq = scale * dqAccum rounded to bf16. A thread per float4 of dqAccum,
// lane l's fragment n of a stripe (queryGradStripe): its elements are columns 8n + 2t, 8n + 2t + 1
// of the stripe's rows g and g + 8 (FragmentLane), two bf16 pairs; padding rows are left out.
template <int D>
__global__ void __launch_bounds__(kThreads)
    roundQueryGradKernel(const BackwardArgs args, const Derived dv, const float4* dqAccum) {
  constexpr int kFragments = kStripe * D / 4;  // a stripe's float4s
  const int T = args.shape.T, H = args.shape.H, stripes = dv.qTiles * kWarps;
  const int64_t index = int64_t(blockIdx.x) * kThreads + threadIdx.x;
  if (index >= int64_t(args.shape.B) * H * stripes * kFragments) return;
  const int64_t stripe = index / kFragments;  // of (B, H, stripes)
  const int n = int(index % kFragments) / 32, bh = int(stripe / stripes), b = bh / H, h = bh % H;
  const FragmentLane fl = fragmentLane(int(index % 32));
  const int first = int(stripe % stripes) * kStripe;
  const float4 x = dqAccum[index];
  bf16* column = headRows(args.dq, b, h) + fl.column(n, 0);
  const float s = args.scale;
  if (const int i = first + fl.row(0); i < T)
    *reinterpret_cast<uint32_t*>(column + i * args.dq.st) = bf16Word(s * x.x, s * x.y);
  if (const int i = first + fl.row(2); i < T)
    *reinterpret_cast<uint32_t*>(column + i * args.dq.st) = bf16Word(s * x.z, s * x.w);
}

template <int D>
cudaError_t launchAtomicDq(const BackwardArgs& args, const float* rowDot, float* dqAccum, double* partials,
                           cudaStream_t stream) {
  const AttentionShape& s = args.shape;
  const Derived dv = derive(s, args.dropout);
  const WorkspaceLayout layout = workspaceLayout(args);
  const bool biasGrads = wantsBiasGrads(args), dropout = dv.threshold > 0;
  const bool warpgroup = args.products == TileProducts::WarpgroupMma;
  const auto keyGrad =
      warpgroup
          ? (biasGrads
                 ? (dropout ? keyGradKernel<D, true, true, true, true> : keyGradKernel<D, false, true, true, true>)
                 : (dropout ? keyGradKernel<D, true, true, false, true> : keyGradKernel<D, false, true, false, true>))
      : biasGrads ? (dropout ? keyGradKernel<D, true, true, true> : keyGradKernel<D, false, true, true>)
                  : (dropout ? keyGradKernel<D, true, true> : keyGradKernel<D, false, true>);
  const size_t keyBytes = KeyGradAtomicSmem<D>::bytes;
  if (cudaError_t e = allowSharedMemory(keyGrad, keyBytes); e != cudaSuccess) return e;
  if (cudaError_t e = cudaMemsetAsync(dqAccum, 0, layout.partials - layout.dqAccum, stream); e != cudaSuccess) return e;
  if (cudaError_t e = launch(keyGrad, dim3(dv.qTiles, s.H, s.B), keyBytes, stream, args, dv, rowDot, dqAccum, partials);
      e != cudaSuccess)
    return e;
  const int64_t fragments = int64_t(s.B) * s.H * dv.qTiles * kBr * D / 4;  // dqAccum's float4s
  return launch(roundQueryGradKernel<D>, dim3(unsigned((fragments + kThreads - 1) / kThreads)), 0, stream, args, dv,
                reinterpret_cast<const float4*>(dqAccum));
}

template <int D>
cudaError_t atomicDqKernelFactsOf(KernelFacts* facts) {
  FactsFiller fill{facts};
  fill.add(FactsSlot::KeyGradDq, keyGradKernel<D, false, true>, "keyGrad+dQ", KeyGradAtomicSmem<D>::bytes);
  fill.add(FactsSlot::KeyGradDqBias, keyGradKernel<D, false, true, true>, "keyGrad+dQ+bias",
           KeyGradAtomicSmem<D>::bytes);
  fill.add(FactsSlot::RoundQueryGrad, roundQueryGradKernel<D>, "roundQueryGrad", 0);
  fill.add(FactsSlot::KeyGradDqWarpgroup, keyGradKernel<D, false, true, false, true>, "keyGrad+dQ+wgmma",
           KeyGradAtomicSmem<D>::bytes);
  return fill.error;
}

}  // namespace

namespace linear_bias_passes {

cudaError_t atomicDqGrads(const BackwardArgs& args, const float* rowDot, float* dqAccum, double* partials,
                          cudaStream_t stream) {
  return args.shape.D == 64 ? launchAtomicDq<64>(args, rowDot, dqAccum, partials, stream)
                            : launchAtomicDq<128>(args, rowDot, dqAccum, partials, stream);
}

cudaError_t atomicDqKernelFacts(int D, KernelFacts* facts) {
  return D == 64 ? atomicDqKernelFactsOf<64>(facts) : atomicDqKernelFactsOf<128>(facts);
}

}  // namespace linear_bias_passes
}  // namespace xtrap::cuda
