// The fused ALiBi-family attention's backward (linear_bias_attention.cu has the overview): what
// both schemes do, D_i (rowDotKernel) before their passes and the sum of the bias gradients'
// per-block partials after them (reduceBiasGradsKernel); the passes themselves are
// linear_bias_attention_backward_two_pass.cu's and linear_bias_attention_backward_atomic_dq.cu's.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/bf16_words.cuh"
#include "model/position/linear_bias_attention.cuh"
#include "model/position/linear_bias_attention_launch.cuh"
#include "model/position/linear_bias_attention_layout.cuh"
#include "model/position/linear_bias_attention_tile_block.cuh"

namespace xtrap::cuda {
namespace {

// rowDot[b, h, i] = sum_d dO[b, h, i, d] * O[b, h, i, d] in fp32. A row is D / 8 threads (8 at
// D = 64), each reading 16 bytes of O and of dO (the glue's layout guarantee, as copyRows reads
// them) and summing its 8 products in order, then the row's threads sum theirs by halving
// exchanges: a fixed order. One warp a row read 2 bytes a lane: 64 loads of 2 bytes for a row
// of D = 64, where this makes 16 of 16 bytes.
template <int D>
constexpr int kRowDotRows = kThreads / (D / 8);  // a block's rows
template <int D>
__global__ void __launch_bounds__(kThreads) rowDotKernel(const BackwardArgs args, float* rowDot) {
  constexpr int kPieces = D / 8;
  static_assert(32 % kPieces == 0, "a row's threads in one warp");
  const int T = args.shape.T, H = args.shape.H;
  const int64_t rowIndex = int64_t(blockIdx.x) * kRowDotRows<D> + threadIdx.x / kPieces;
  const bool inside = rowIndex < int64_t(args.shape.B) * H * T;  // every lane stays for the exchanges
  float acc = 0.f;
  if (inside) {
    const int i = int(rowIndex % T), bh = int(rowIndex / T), b = bh / H, h = bh % H, col = threadIdx.x % kPieces * 8;
    const uint4 o = *reinterpret_cast<const uint4*>(headRows(args.o, b, h) + i * args.o.st + col);
    const uint4 dO = *reinterpret_cast<const uint4*>(headRows(args.dO, b, h) + i * args.dO.st + col);
    const uint32_t ow[4] = {o.x, o.y, o.z, o.w}, dw[4] = {dO.x, dO.y, dO.z, dO.w};
#pragma unroll
    for (int w = 0; w < 4; ++w) acc = fmaf(highBf16(ow[w]), highBf16(dw[w]), fmaf(lowBf16(ow[w]), lowBf16(dw[w]), acc));
  }
#pragma unroll
  for (int lanes = kPieces / 2; lanes > 0; lanes >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, lanes);
  if (inside && threadIdx.x % kPieces == 0) rowDot[rowIndex] = acc;
}

// One thread per (head, parameter): the sum over batches and query tiles, in that fixed order.
__global__ void reduceBiasGradsKernel(const double* partials, int B, int H, int qTiles, float* dPast, float* dFuture,
                                      float* dFirst) {
  const int t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= H * 3) return;
  const int h = t / 3, which = t % 3;
  float* out = which == 0 ? dPast : (which == 1 ? dFuture : dFirst);
  if (out == nullptr) return;
  double sum = 0.0;
  for (int b = 0; b < B; ++b)
    for (int tile = 0; tile < qTiles; ++tile) sum += partials[(int64_t(b * H + h) * qTiles + tile) * 3 + which];
  out[h] = float(sum);
}

template <int D>
cudaError_t launchBackward(const BackwardArgs& args, void* workspace, cudaStream_t stream) {
  const AttentionShape& s = args.shape;
  const Derived dv = derive(s, args.dropout);
  const WorkspaceLayout layout = workspaceLayout(args);
  unsigned char* bytes = static_cast<unsigned char*>(workspace);
  float* rowDot = reinterpret_cast<float*>(bytes);
  const bool biasGrads = wantsBiasGrads(args), atomic = atomicDq(args);
  float* dqAccum = atomic ? reinterpret_cast<float*>(bytes + layout.dqAccum) : nullptr;
  double* partials = biasGrads ? reinterpret_cast<double*>(bytes + layout.partials) : nullptr;

  const int64_t rows = int64_t(s.B) * s.H * s.T;
  if (cudaError_t e = launch(rowDotKernel<D>, dim3(unsigned((rows + kRowDotRows<D> - 1) / kRowDotRows<D>)), 0, stream,
                             args, rowDot);
      e != cudaSuccess)
    return e;

  // TwoPass: keyGrad, then queryGrad (dQ and the bias gradients). AtomicDq: keyGrad alone (dQ's adds
  // and the bias gradients), then dQ's rounding.
  if (cudaError_t e = atomic ? linear_bias_passes::atomicDqGrads(args, rowDot, dqAccum, partials, stream)
                             : linear_bias_passes::twoPassGrads(args, rowDot, partials, stream);
      e != cudaSuccess)
    return e;
  if (!biasGrads) return cudaSuccess;
  return launch(reduceBiasGradsKernel, dim3(ceilDiv(s.H * 3, kThreads)), 0, stream, partials, s.B, s.H, dv.qTiles,
                args.dSlopePast, args.dSlopeFuture, args.dFirstTokenBias);
}

template <int D>
cudaError_t backwardKernelFactsOf(KernelFacts* facts) {
  FactsFiller fill{facts};
  fill.add(FactsSlot::RowDot, rowDotKernel<D>, "rowDot", 0);
  return fill.error;
}

}  // namespace

namespace linear_bias_passes {

cudaError_t backward(const BackwardArgs& args, void* workspace, cudaStream_t stream) {
  return args.shape.D == 64 ? launchBackward<64>(args, workspace, stream)
                            : launchBackward<128>(args, workspace, stream);
}

cudaError_t backwardKernelFacts(int D, KernelFacts* facts) {
  return D == 64 ? backwardKernelFactsOf<64>(facts) : backwardKernelFactsOf<128>(facts);
}

}  // namespace linear_bias_passes
}  // namespace xtrap::cuda
