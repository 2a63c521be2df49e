#pragma once
// Fused attention for the whole ALiBi family on CUDA (issue 23): one flash-attention-style kernel
// pair (forward, backward) parameterised per head by a LinearBiasSpec. The bias is computed per
// score tile inside the tile loop from the per-head numbers below and never stored; tiles whose
// every cell is blocked (causal heads, one-sided heads) are skipped, and so are those whose every
// probability underflows (ForwardArgs::tileBounds: far from the diagonal). bf16 inputs and outputs,
// float32 accumulation and softmax statistics.
//
// A plain C++ API over raw device pointers (no LibTorch): the LibTorch glue is
// linear_bias_attention_cuda.cpp. The per-element formulas live in linear_bias_tile.h, which the
// CPU tests check against LinearBiasSpec::bias.
//
// B = batch, H = heads, T = sequence length (any), D = head dimension (64 or 128).
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "cuda/heads_view.cuh"
#include "cuda/rng_state.h"

namespace xtrap::cuda {

// The per-head linear bias (linear_bias_spec.h) with the slopes in use now: learned slopes are
// sigmoid(p) / interpolation divisor, computed on the device by the caller.
struct LinearBiasArgs {
  const float* slopePast = nullptr;       // (H) device
  const float* slopeFuture = nullptr;     // (H) device
  const float* firstTokenBias = nullptr;  // (H) device, or nullptr: no first-token bias (all but bialibi)
  uint64_t blockPast = 0;                 // bit h: head h blocks earlier keys (H <= 64)
  uint64_t blockFuture = 0;               // bit h: head h blocks later keys
  float futureShift = 0.f;                // 0.5 for alibi-offset
  bool causal = false;                    // every head also blocks later keys (decoders)
};

struct AttentionShape {
  int B = 0, H = 0, T = 0, D = 0;
};

// Which instructions compute the tile products (the forward's S = Q K^T and O += P~ V; the
// backward's S, dP~, dV, dK and dQ, with either scheme). WarpMma is the faster on Hopper too
// (results/gpu.md, 2026-11-27: the warpgroup MMA's forward took 1.37-1.50x its time, limited by
// copies into the core-matrix layout), so it is the default; WarpgroupMma stays selectable
// (bench_attention, fused_attention_checks) as the base of a swizzled layout.
enum class TileProducts {
  // mma.sync (sm_80 and later): each warp reads every fragment of the tile walked over (K and V; in
  // keyGrad Q and dO) from shared memory with ldmatrix for its own 16 rows.
  WarpMma,
  // Hopper's warpgroup MMA (wgmma.mma_async; compute capability 9.0 only,
  // linearBiasAttentionProductsCheck): the block's 4 warps compute each (64, 64) product in one
  // instruction per 16 of K, reading the shared tiles once for the 4 warps, asynchronously.
  WarpgroupMma,
};

// Softmax(scale * q k^T + bias) v with dropout p on the probabilities (training), its mask keyed
// by the (seed, offset) of `rng` (cuda/rng_state.h), which the kernel reads when it runs: in a
// CUDA graph every replay draws a new mask, as PyTorch's own dropout does. The forward records the
// pair it used in `resolvedRng`, from which the backward's rng regenerates the same mask.
struct ForwardArgs {
  AttentionShape shape;
  HeadsView q, k, v;  // (B, H, T, D) inputs
  HeadsView o;        // (B, H, T, D) output
  // (B, H, T) contiguous output: each row's log-sum-exp in base 2, log2 sum_j 2^(log2(e) logit_ij).
  float* lse = nullptr;
  LinearBiasArgs bias;
  float scale = 1.f;               // on q k^T only; the bias is added unscaled (Press et al.)
  float dropout = 0.f;             // in [0, 1)
  RngState rng;                    // read only where dropout > 0
  int64_t* resolvedRng = nullptr;  // (2) int64 output (seed, offset), or nullptr; written where dropout > 0
  // (3, B, H, T) contiguous output, or nullptr: per row, W = sum_j P_ij c_ij for the three bias
  // parameters (slopePast, slopeFuture, firstTokenBias; c the cell's derivative of its bias), which
  // the AtomicDq backward centres its bias gradients on (tile::CentredBiasGrads). Only that backward
  // with bias gradients needs them.
  float* rowWeights = nullptr;
  // linearBiasAttentionTileBoundsFloats fp32 of scratch, 16-byte aligned, or nullptr: per 64-row tile
  // the bounds of its logits (tile::TileBound: max |q_i|, max |k_i|, min scale q_i . k_i) and where
  // its walks start and end, which the forward computes first (for the heads whose bias can fall
  // that low within T, tile::biasCanReachNegligible; the others skip nothing); it then skips the tile
  // pairs whose every probability the bounds show to be below 2^-136 (tile::negligibleTile: far from
  // the diagonal, where ALiBi's bias makes them underflow) at either end of each walk. The backward
  // takes them too (BackwardArgs::tileBounds). nullptr: every pair that is not blocked is computed.
  float* tileBounds = nullptr;
  TileProducts products = TileProducts::WarpMma;
};

// How the backward sums dQ over key tiles. Each is the faster for one use (bench_attention times
// both; results/gpu.md, 2026-11-27): AtomicDq without bias gradients, TwoPass with them (where
// AtomicDq, whose keyGrad then also sums them, took 1.23-1.36x TwoPass's time).
enum class BackwardScheme {
  // keyGrad (dK, dV over the query tiles) then queryGrad (dQ and the bias gradients over the key
  // tiles): S = Q K^T and dP = dO V^T computed in both, 7 tile products per tile pair, every output
  // summed by one block: dq, dk, dv bit-identical from run to run.
  TwoPass,
  // FlashAttention-2's own backward: keyGrad also writes each pair's dS to shared memory and adds
  // dS K into an fp32 dQ in global memory with atomic adds, which a last kernel scales and rounds
  // to bf16: 5 tile products per pair, for (B, H, T rounded up to 64, D) fp32 of workspace, and dq
  // summed in the order the blocks arrive (its last bits vary from run to run; dk, dv and the bias
  // gradients do not). keyGrad also sums the bias gradients, centred on the forward's rowWeights
  // (which BackwardArgs::rowWeights must then pass on).
  AtomicDq,
};

// Gradients of the forward above, given dL/do (BackwardScheme). dq, dk, dv are written (not
// accumulated). dSlopePast / dSlopeFuture / dFirstTokenBias (H) are dL/d(slope) and dL/d(first-token
// bias) when not nullptr, reduced in a fixed order: bit-identical from run to run.
struct BackwardArgs {
  AttentionShape shape;
  HeadsView q, k, v, o, dO;          // (B, H, T, D): the forward's inputs and output, and dL/do
  const float* lse = nullptr;        // (B, H, T) from the forward (base 2)
  HeadsView dq, dk, dv;              // (B, H, T, D) outputs
  float* dSlopePast = nullptr;       // (H) or nullptr
  float* dSlopeFuture = nullptr;     // (H) or nullptr
  float* dFirstTokenBias = nullptr;  // (H) or nullptr
  LinearBiasArgs bias;
  float scale = 1.f;
  float dropout = 0.f;
  RngState rng;  // the forward's (seed, offset): its resolvedRng, read through pointers (rng_state.h)
  BackwardScheme scheme = BackwardScheme::TwoPass;
  const float* rowWeights = nullptr;  // (3, B, H, T) from the forward (ForwardArgs::rowWeights): AtomicDq
                                      // with bias gradients only
  // The forward's ForwardArgs::tileBounds, or nullptr: the pairs whose every probability is below
  // 2^-136 are skipped, whose exp2 the backward would flush to 0 anyway.
  const float* tileBounds = nullptr;
  TileProducts products = TileProducts::WarpMma;
};

// Why these arguments cannot run (a one-line reason), or nullptr. The launchers check it too and
// return cudaErrorInvalidValue.
const char* linearBiasAttentionCheck(const AttentionShape& shape, float dropout);

// Why GPU `device` cannot run the kernels of head dimension D (a one-line reason), or nullptr: they
// need compute capability 8.0+ (bf16 tensor cores: mma.sync, ldmatrix, cp.async) and their largest
// tile layout for D in shared memory (AtomicDq's keyGrad: about 114 KiB a block at D = 128, which the
// A100 and H100 give and sm_86/89 GPUs do not; about 66 KiB at D = 64).
const char* linearBiasAttentionDeviceCheck(int device, int D);

// Why GPU `device` cannot run the kernels with these products (a one-line reason), or nullptr:
// TileProducts::WarpgroupMma is compiled for sm_90a only, which runs on compute capability 9.0.
const char* linearBiasAttentionProductsCheck(int device, TileProducts products);

// The warpgroup MMA's tile products alone, on the GPU: one warpgroup computes from row-major bf16
// (64, D) tiles q, k, v and a (64, 64) tile p each product the kernels compute, with their own
// product code, operand layouts and descriptors, into row-major fp32 outputs:
//   s = q k^T      both operands K-major in shared memory (the forward's S, keyGrad's S^T)
//   sFromZero      the same by the product that overwrites its accumulators (dP, dP^T)
//   o = p v        A in registers, B MN-major (P~ V, dV, dK, queryGrad's dS K)
//   dq = p^T k     A and B MN-major, A stored from registers (AtomicDq's dS K, p as dS^T)
// So that a GPU test can tell which layout a wrong result of the kernels comes from
// (fused_attention_checks --products warpgroup). Device pointers; D 64 or 128; compute capability
// 9.0 only (linearBiasAttentionProductsCheck).
struct WarpgroupProductsProbe {
  int D = 64;
  const void *q = nullptr, *k = nullptr, *v = nullptr, *p = nullptr;      // bf16: (64, D) x 3, (64, 64)
  float *s = nullptr, *sFromZero = nullptr, *o = nullptr, *dq = nullptr;  // (64, 64) x 2, (64, D) x 2
};
cudaError_t linearBiasAttentionProbeWarpgroupProducts(const WarpgroupProductsProbe& probe, cudaStream_t stream);

// One kernel as compiled for this GPU (a profile's static part): registers per thread, shared
// memory per block (static and dynamic), and how many of its blocks one SM holds at once.
struct KernelFacts {
  const char* name = "";
  int registers = 0;
  size_t sharedBytes = 0;
  int blocksPerSm = 0;
};
// forward, rowDot, keyGrad, queryGrad without and with bias gradients (TwoPass); keyGrad with its
// dQ adds, without and with bias gradients, dQ's rounding, and the forward with row weights
// (AtomicDq); the tile bounds and walks; with TileProducts::WarpgroupMma the forward, keyGrad,
// keyGrad with its dQ adds and queryGrad
constexpr int kKernelFactsCount = 15;
// Fills facts[0..kKernelFactsCount) for head dimension D (64 or 128) on the current device: the
// instances without dropout, which the benchmark and evaluation run.
cudaError_t linearBiasAttentionKernelFacts(int D, KernelFacts* facts);

// The floats of ForwardArgs::tileBounds for this shape: 8 per 64-row tile of each head.
size_t linearBiasAttentionTileBoundsFloats(const AttentionShape& shape);

cudaError_t linearBiasAttentionForward(const ForwardArgs& args, cudaStream_t stream);

// Device scratch the backward of these arguments needs, in bytes (row statistics, AtomicDq's fp32
// dQ, and per-block gradient partials where bias gradients are asked for).
size_t linearBiasAttentionBackwardWorkspace(const BackwardArgs& args);
cudaError_t linearBiasAttentionBackward(const BackwardArgs& args, void* workspace, cudaStream_t stream);

}  // namespace xtrap::cuda
