// Fused attention for the ALiBi family (linear_bias_attention.cuh): forward and backward.
//
// B = batch, H = heads, T = sequence length, D = head dimension (64 or 128).
// A query tile is kBr = 64 rows, a key tile kBc = 64 columns; a thread block has 4 warps, each
// owning 16 rows of the block's tile (query rows; keys in keyGrad).
//
// The tile products are mma.sync m16n8k16 (bf16 -> fp32) on fragments whose register layout is
// documented (warp_mma.cuh), read from shared memory with ldmatrix, so a warp's scores, their
// probabilities and its accumulators stay in registers, and each lane knows the (i, j) of each
// of its cells: the bias is computed there, per cell, from the head's spec (linear_bias_tile.h).
// A score of row i of a warp's 16 lies in the 4 lanes of one group (warp_mma.cuh's g): a row's
// max or sum takes 2 shuffles. Only Q, K, V (dO) tiles are in shared memory. The tile walked over
// (K and V; Q, dO and their row statistics in keyGrad) is double-buffered: cp.async copies of the
// next visited tile are in flight while the current one is computed (pipelinedWalk).
//
// Forward, one block per (query tile, head, batch), FlashAttention-2's loop: for every key tile
// that is not fully blocked, S = scale * Q K^T + bias in registers, online softmax with the
// running row max m and sum l in fp32, O = O * exp(m_old - m_new) + P~ V with P~ (bf16, after
// dropout) reused in registers as the A operand. At the end O /= l and the row's log-sum-exp
// m + log l is saved, in base 2 as the kernels' exponentials take it (the backward's P then costs
// no multiply of it per cell): it is all the backward needs of the softmax.
//
// Backward, FlashAttention-2's equations with P recomputed from the saved log-sum-exp:
//   P = exp(S + bias - lse), D_i = rowsum(dO o O), dP = dO V^T (masked by the same dropout),
//   dS = P o (dP - D_i), dV = P~^T dO, dK = scale dS^T Q, dQ = scale dS K, dBias = dS.
// rowDot computes D_i; then two passes, deterministic (no float atomics whose order varies):
// keyGrad (one block per key tile: dK, dV in registers over every query tile, its warps computing
// S^T = K Q^T, so that P~^T and dS^T are A operands in registers) and queryGrad (one block per
// query tile: dQ in registers over every key tile, and the bias gradients). Every output is summed
// by one block, at the price of S and dP computed in both: 7 tile products per tile pair
// (BackwardScheme::TwoPass). BackwardScheme::AtomicDq is FlashAttention-2's own way: keyGrad also
// writes dS^T to shared memory, reads it back as dS and adds dS K to an fp32 dQ in global memory with
// atomic adds (addQueryGrad; laid out in the adding lanes' order, queryGradStripe, so that each add
// of a warp fills whole sectors), which roundQueryGradKernel scales and rounds to bf16: 5 products per
// pair, and no queryGrad. Its keyGrad also sums the bias gradients, each cell's P dP centred on its
// row's weights, which the forward sums with the softmax (tile::CentredBiasGrads): a key tile sees
// each row in part, and needs no row's sum of P dP.
// In TwoPass's queryGrad the bias gradients dslopePast = sum dS * (-(i - j)), dslopeFuture =
// sum dS * (-(j - i - shift)), dfirstTokenBias = sum dS over first-token cells are summed per lane in a fixed cell
// order (on a linear tile with no first-token cell from its one term, without biasCell's branches), corrected for the
// rounding of D_i by each row's exact sum of P o dP (tile::RowTerm, summed over the row's cells), then summed across
// lanes and warps in a fixed order, written per block to a buffer, and summed over (batch, block) in a fixed order by
// one thread per (head, parameter).
//
// Negligible pairs: far from the diagonal ALiBi's bias makes a head's probabilities underflow (with
// slope 0.5, keys some 200 tokens away). With ForwardArgs::tileBounds the forward first computes
// each 64-row tile's largest |q| and |k| and smallest diagonal logit (tileBoundsKernel, one read of
// q and k), then where each tile's walks start and end once the pairs whose every probability these
// bounds show to be below 2^-136 (tile::negligibleTile) are left out at both ends
// (tileWalksKernel). Every tile loop walks only that span: the backward would compute the
// probabilities left out as exactly 0, the forward's sum and output lose less than 2^-136 of theirs.
// A pure function of the inputs, so the backward skips the same pairs.
//
// Dropout: Philox4x32-10 keyed by dropoutSeed (the call's seed and offset), one draw per (batch*H + head, row, group of
// 4 keys) (linear_bias_tile.h), so the backward regenerates the forward's mask cell by cell. A group is the 4 keys one
// lane holds in two adjacent fragments: the forward and queryGrad draw once per 4 cells, keyGrad (transposed) once
// per 2.
//
// Per cell, the kernels work in base 2 (log2(e) folded into the scale and the bias, as
// FlashAttention-2 does): each exponential is one ex2 instruction. Each kernel is instantiated with
// and without dropout, so evaluation and dropout-free training carry no per-cell dropout work.
//
// Hopper (compute capability 9.0): the forward and the backward (either scheme) can compute their
// tile products with the warpgroup MMA (TileProducts::WarpgroupMma, warpgroup_mma.cuh): a block's 4
// warps are one warpgroup, its 64 rows (queries; keys in keyGrad) one wgmma's M, and its tiles
// core-matrix tiles (core_matrix_tile.h) that wgmma reads from shared memory once for the 4 warps;
// each warp's accumulators lie in the registers mma.sync's would, so the rest of each kernel is the
// same code. In the backward the products a pair needs next are left in flight while the warp
// works: dP's while the scores become probabilities, dV's while dS becomes its A operand. Measured
// slower than mma.sync on an H200 (results/gpu.md, 2026-11-27: forward 1.37-1.50x, forward +
// backward 1.10-1.34x): in ncu on an H100 each lane's 16-byte copy into the core-matrix layout is a
// shared-memory wavefront and an L2 sector of its own (32 a warp's copy, against 15 and 24 into
// ldmatrix's), and L2 is 83-87% busy. What would make it faster: a 128-byte-swizzled layout whose
// rows' chunks lie together, TMA loads, and in the forward the next tile's scores in flight across
// this one's softmax (FA3).
// Measured slower on the H100 (results/gpu/h100-2026-11-26, causal B8 L2048 D 64), and removed: a
// forward of 32 query rows a warp (two 64-row query tiles a block, each K and V fragment read from
// shared memory serving two tile products; 241 registers, 2 blocks an SM): its forward 0.402 ms
// against 0.350 for the 16-row one here; and FlashAttention-2's one-pass backward in its
// deterministic mode (dS K added into per-block fp32 dQ slices that a last kernel sums, 5 tile
// products per pair instead of 7): 2.11 ms forward + backward against 1.36 for these two passes,
//
// The files, split by pass as FlashAttention's csrc splits its kernels: this one, the entry points
// of linear_bias_attention.cuh (argument checks, then the pass); linear_bias_attention_forward.cu
// (the tile bounds and walks, the forward); linear_bias_attention_backward.cu (rowDot, the bias
// gradients' sum, and between them the scheme's passes: linear_bias_attention_backward_two_pass.cu
// and linear_bias_attention_backward_atomic_dq.cu, whose keyGrad is linear_bias_attention_key_grad.cuh);
// linear_bias_attention_warpgroup_probe.cu (the warpgroup MMA's products alone). What the kernels
// share: linear_bias_attention_layout.cuh (tiles, shared-memory layouts), _products.cuh (the tile
// products), _tile_block.cuh (a block's tile, walk, copies, logits); what the host code shares:
// linear_bias_attention_launch.cuh.
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "model/position/linear_bias_attention.cuh"
#include "model/position/linear_bias_attention_launch.cuh"
#include "model/position/linear_bias_attention_layout.cuh"
#include "model/position/linear_bias_tile.h"

namespace xtrap::cuda {
namespace {

// Whether a tile-bounds buffer (ForwardArgs::tileBounds) is aligned for its 16-byte bounds and walks.
bool boundsAligned(const float* tileBounds) {
  return reinterpret_cast<uintptr_t>(tileBounds) % alignof(tile::TileBound) == 0;
}

bool readable(const HeadsView& view) {
  return view.data != nullptr && reinterpret_cast<uintptr_t>(view.data) % 16 == 0 && view.sb % 8 == 0 &&
         view.sh % 8 == 0 && view.st % 8 == 0;
}

cudaError_t zeroBiasGrads(const BackwardArgs& args, cudaStream_t stream) {
  for (float* g : {args.dSlopePast, args.dSlopeFuture, args.dFirstTokenBias})
    if (g != nullptr)
      if (cudaError_t e = cudaMemsetAsync(g, 0, size_t(args.shape.H) * sizeof(float), stream); e != cudaSuccess)
        return e;
  return cudaSuccess;
}

}  // namespace

const char* linearBiasAttentionCheck(const AttentionShape& s, float dropout) {
  if (s.B < 1 || s.H < 1 || s.T < 0) return "fused ALiBi attention: B and H must be positive, T non-negative";
  if (s.B > 65535) return "fused ALiBi attention: at most 65535 sequences per call";
  if (s.H > 64) return "fused ALiBi attention: at most 64 heads (the block flags are a 64-bit mask)";
  if (s.D != 64 && s.D != 128) return "fused ALiBi attention: head dimension must be 64 or 128";
  if (!(dropout >= 0.f && dropout < 1.f)) return "fused ALiBi attention: dropout must be in [0, 1)";
  // The backward's row-statistics kernel has one warp per (b, h, t) row in a 1-D grid.
  if (int64_t(s.B) * s.H * s.T > int64_t(kWarps) * ((int64_t(1) << 31) - 1))
    return "fused ALiBi attention: more than 2^33 (batch, head, position) rows";
  return nullptr;
}

const char* linearBiasAttentionDeviceCheck(int device, int D) {
  int major = 0, optin = 0;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess ||
      cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device) != cudaSuccess) {
    cudaGetLastError();  // not this process's error to keep
    return "fused ALiBi attention: cannot query the GPU's compute capability and shared memory";
  }
  if (major < 8) return "fused ALiBi attention: needs a GPU of compute capability 8.0 or newer (bf16 tensor cores)";
  if (D != 64 && D != 128) return "fused ALiBi attention: head dimension must be 64 or 128";
  if (size_t(optin) < (D == 64 ? largestSmem<64>() : largestSmem<128>()))
    return D == 64 ? "fused ALiBi attention: this GPU has too little shared memory per block for head dimension 64"
                   : "fused ALiBi attention: this GPU has too little shared memory per block for head dimension 128";
  return nullptr;
}

const char* linearBiasAttentionProductsCheck(int device, TileProducts products) {
  if (products == TileProducts::WarpMma) return nullptr;
  int major = 0, minor = 0;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) != cudaSuccess) {
    cudaGetLastError();  // not this process's error to keep
    return "fused ALiBi attention: cannot query the GPU's compute capability";
  }
  if (major != 9 || minor != 0)
    return "fused ALiBi attention: the warpgroup MMA's tile products need a GPU of compute capability 9.0 (sm_90a: "
           "H100, H200)";
  return nullptr;
}

cudaError_t linearBiasAttentionForward(const ForwardArgs& args, cudaStream_t stream) {
  if (linearBiasAttentionCheck(args.shape, args.dropout) != nullptr) return cudaErrorInvalidValue;
  int device = 0;
  if (cudaError_t e = cudaGetDevice(&device); e != cudaSuccess) return e;
  if (linearBiasAttentionProductsCheck(device, args.products) != nullptr) return cudaErrorNotSupported;
  if (args.shape.T == 0) return cudaSuccess;  // empty tensors may have no storage at all
  if (!readable(args.q) || !readable(args.k) || !readable(args.v) || !readable(args.o) || args.lse == nullptr ||
      args.bias.slopePast == nullptr || args.bias.slopeFuture == nullptr || !boundsAligned(args.tileBounds))
    return cudaErrorInvalidValue;
  return linear_bias_passes::forward(args, stream);
}

cudaError_t linearBiasAttentionProbeWarpgroupProducts(const WarpgroupProductsProbe& probe, cudaStream_t stream) {
  if (probe.D != 64 && probe.D != 128) return cudaErrorInvalidValue;
  for (const void* pointer : {probe.q, probe.k, probe.v, probe.p, static_cast<const void*>(probe.s),
                              static_cast<const void*>(probe.sFromZero), static_cast<const void*>(probe.o),
                              static_cast<const void*>(probe.dq)})
    if (pointer == nullptr) return cudaErrorInvalidValue;
  if (reinterpret_cast<uintptr_t>(probe.dq) % 16 != 0) return cudaErrorInvalidValue;  // its vector adds
  int device = 0;
  if (cudaError_t e = cudaGetDevice(&device); e != cudaSuccess) return e;
  if (linearBiasAttentionProductsCheck(device, TileProducts::WarpgroupMma) != nullptr) return cudaErrorNotSupported;
  return linear_bias_passes::probeWarpgroupProducts(probe, stream);
}

cudaError_t linearBiasAttentionKernelFacts(int D, KernelFacts* facts) {
  if (D != 64 && D != 128) return cudaErrorInvalidValue;
  for (auto passFacts : {linear_bias_passes::forwardKernelFacts, linear_bias_passes::backwardKernelFacts,
                         linear_bias_passes::twoPassKernelFacts, linear_bias_passes::atomicDqKernelFacts})
    if (cudaError_t e = passFacts(D, facts); e != cudaSuccess) return e;
  return cudaSuccess;
}

size_t linearBiasAttentionTileBoundsFloats(const AttentionShape& shape) {
  // Per tile a TileBound and a TileWalks, 4 floats' bytes each (NegligibleTiles).
  static_assert(sizeof(tile::TileBound) == 4 * sizeof(float) && sizeof(TileWalks) == 4 * sizeof(float));
  return size_t(shape.B) * shape.H * ceilDiv(shape.T, kBr) * 8;
}

size_t linearBiasAttentionBackwardWorkspace(const BackwardArgs& args) { return workspaceLayout(args).bytes; }

cudaError_t linearBiasAttentionBackward(const BackwardArgs& args, void* workspace, cudaStream_t stream) {
  if (linearBiasAttentionCheck(args.shape, args.dropout) != nullptr) return cudaErrorInvalidValue;
  if (args.shape.T == 0) return zeroBiasGrads(args, stream);  // no pair: zero slope gradients
  for (const HeadsView* view : {&args.q, &args.k, &args.v, &args.o, &args.dO, &args.dq, &args.dk, &args.dv})
    if (!readable(*view)) return cudaErrorInvalidValue;
  if (args.lse == nullptr || workspace == nullptr || args.bias.slopePast == nullptr || args.bias.slopeFuture == nullptr)
    return cudaErrorInvalidValue;
  if (atomicDq(args) && wantsBiasGrads(args) && args.rowWeights == nullptr) return cudaErrorInvalidValue;
  if (!boundsAligned(args.tileBounds)) return cudaErrorInvalidValue;
  int device = 0;
  if (cudaError_t e = cudaGetDevice(&device); e != cudaSuccess) return e;
  if (linearBiasAttentionProductsCheck(device, args.products) != nullptr) return cudaErrorNotSupported;
  return linear_bias_passes::backward(args, workspace, stream);
}

}  // namespace xtrap::cuda
