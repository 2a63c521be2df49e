// The fused ALiBi-family attention kernels (linear_bias_attention*.cu) run on the CPU through
// tests/cuda_emulation, where there is no GPU: the kernels' own code, tile loops, barriers and
// mma.sync fragments, not a model of them. Checked against a double-precision reference that materialises
// the bias from the formula of linear_bias_spec.h, written out again below:
//   j < i: -slopePast[h] (i - j), or -inf if head h blocks the past;
//   j > i: -slopeFuture[h] (j - i - shift), or -inf if head h blocks the future (every head when causal);
//   j = i: 0; with a first-token bias, every pair touching position 0 gets firstTokenBias[h] instead.
// For every variant, D in {64, 128}, T across tile boundaries (1, 7, 64, 65, 130): the output,
// log-sum-exp, dq, dk, dv, and the slope and first-token-bias gradients (of every variant at D 128,
// the fixed-slope ones as if learned); dropout's mask the same in the backward as in the forward,
// keyed by the call's (seed, offset) whether the forward is given them as values or, as in a CUDA
// graph, reads them through pointers (cuda/rng_state.h).
// Every kernel instance runs: D 64 and 128, with and without dropout, with and without bias
// gradients. Every case skips negligible pairs (ForwardArgs::tileBounds); slopes steep enough for
// some to be skipped, and v made NaN where only skipped pairs would read it, show that they are.
// Every case runs under both of the emulation's extreme schedules and must give bit-identical
// results: a difference is a missing barrier (a race on the GPU). The warpgroup MMA products
// (TileProducts::WarpgroupMma: the forward's and either backward's) must give the mma.sync
// kernels' results bit for bit: the emulation sums both products' terms in the same order, so any
// difference is a layout or an order the two disagree on. What this cannot show (speed,
// the GPU's memory model, ex2.approx's rounding) is the gpu-labelled fused_attention_checks' job on
// the GPU machine.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "cuda/core_matrix_tile.h"
#include "cuda/warp_mma.cuh"
#include "cuda/warpgroup_mma.cuh"
#include "cuda_emulation.h"
#include "cuda_pipeline_primitives.h"
#include "device_buffer.h"
#include "model/counter_dropout.h"
#include "model/position/linear_bias_attention.cuh"
#include "model/position/linear_bias_tile.h"

using cuda_emulation::Buffer;
using xtrap::cuda::AttentionShape;
using xtrap::cuda::HeadsView;
using bf16 = __nv_bfloat16;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// One ALiBi-family variant over H heads. Slopes far above ALiBi's 2^(-8h/H), so that the bias
// shapes every row of these short sequences.
struct Variant {
  std::string name;
  bool causal = false;
  std::vector<float> past, future, firstToken;  // firstToken empty: none
  uint64_t blockPast = 0, blockFuture = 0;
  float shift = 0.f;
};

std::vector<Variant> variants(int H) {
  std::vector<float> fixed, learnedPast, learnedFuture, first;
  uint64_t lowerHalf = 0, upperHalf = 0;
  for (int h = 0; h < H; ++h) {
    fixed.push_back(0.5f * std::pow(2.f, -3.f * h / H));  // 0.5 down to 0.0625 and above
    learnedPast.push_back(0.3f * std::pow(2.f, -2.f * h / H));
    learnedFuture.push_back(0.7f * std::pow(2.f, -5.f * h / H));
    first.push_back(h % 2 ? -0.75f : 1.5f);
    (2 * h < H ? lowerHalf : upperHalf) |= uint64_t(1) << h;
  }
  return {
      {"causal", true, fixed, fixed, {}, 0, 0, 0.f},
      {"symmetric", false, fixed, fixed, {}, 0, 0, 0.f},
      {"offset", false, fixed, fixed, {}, 0, 0, 0.5f},
      {"one-sided", false, fixed, fixed, {}, upperHalf, lowerHalf, 0.f},  // lower half past only, upper future only
      {"learned", false, learnedPast, learnedFuture, {}, 0, 0, 0.f},
      {"bialibi", false, learnedPast, learnedFuture, first, 0, 0, 0.f},
  };
}

double referenceBias(const Variant& v, int h, int i, int j) {
  if (!v.firstToken.empty() && (i == 0 || j == 0)) return v.firstToken[size_t(h)];
  if (j < i) return (v.blockPast >> h) & 1u ? -kInf : -double(v.past[size_t(h)]) * (i - j);
  if (j > i)
    return v.causal || ((v.blockFuture >> h) & 1u) ? -kInf : -double(v.future[size_t(h)]) * (j - i - double(v.shift));
  return 0.0;
}

struct Problem {
  AttentionShape shape;
  Variant variant;
  float dropout = 0.f;
  uint64_t seed = 0x1234'5678'9abcULL;
  bool slopeGradients = false;  // ask for dslopePast and dslopeFuture (the first-token bias's always)
  bool negligibleTiles = true;  // the forward computes the tile bounds, and both passes skip negligible pairs
  uint64_t offset = 36;         // the Philox offset of the call, with `seed` the generator's state
  // The forward reads seed and offset through pointers (a graph's generator state, offset 8 within
  // the graph), rather than as values.
  bool capturedRng = false;
};

// The variants whose slopes the model learns; the others' are buffers, with no gradient asked.
bool learnsSlopes(const Variant& v) { return v.name == "learned" || v.name == "bialibi"; }

// What the kernels return, in the order the reference is compared.
struct Result {
  std::vector<double> o, lse, dq, dk, dv, dPast, dFuture, dFirst;
  std::vector<xtrap::tile::TileBound> tileBounds;  // (B, H, tiles): the forward's, where it computed them
  bool operator==(const Result& other) const {
    return o == other.o && lse == other.lse && dq == other.dq && dk == other.dk && dv == other.dv &&
           dPast == other.dPast && dFuture == other.dFuture && dFirst == other.dFirst;
  }
};

// Inputs in bf16: q, k, v as the glue passes them, views into one fused (B, T, 3, H, D) projection;
// dO contiguous (B, H, T, D).
struct Inputs {
  std::vector<bf16> qkv, dO;
};

Inputs makeInputs(const AttentionShape& s, uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<float> uniform(-1.f, 1.f);
  Inputs in;
  in.qkv.resize(size_t(s.B) * s.T * 3 * s.H * s.D);
  for (bf16& x : in.qkv) x = __float2bfloat16(2.f * uniform(gen));  // peaky enough to test the softmax
  in.dO.resize(size_t(s.B) * s.H * s.T * s.D);
  for (bf16& x : in.dO) x = __float2bfloat16(uniform(gen));
  return in;
}

// Element (b, h, t, d) of q (part 0), k (1) or v (2) in the fused layout, and of a (B, H, T, D) tensor.
size_t fusedIndex(const AttentionShape& s, int part, int b, int h, int t, int d) {
  return ((size_t(b) * s.T + t) * 3 + part) * s.H * s.D + size_t(h) * s.D + d;
}
size_t headsIndex(const AttentionShape& s, int b, int h, int t, int d) {
  return ((size_t(b) * s.H + h) * s.T + t) * s.D + d;
}

// Forward and backward in double from the same bf16 inputs, by the textbook formulas.
Result reference(const Problem& p, const Inputs& in) {
  const AttentionShape& s = p.shape;
  const Variant& v = p.variant;
  const double scale = 1.0 / std::sqrt(double(s.D));
  const uint32_t threshold = xtrap::tile::dropoutThreshold(p.dropout);
  const double keepScale = 1.0 / (1.0 - p.dropout);
  const uint64_t key = xtrap::dropoutKey(p.seed, p.offset);  // the mask's Philox key (counter_dropout.h)
  const size_t n = size_t(s.B) * s.H * s.T * s.D;
  Result r;
  r.o.assign(n, 0.0), r.dq.assign(n, 0.0), r.dk.assign(n, 0.0), r.dv.assign(n, 0.0);
  r.lse.assign(size_t(s.B) * s.H * s.T, 0.0);
  r.dPast.assign(size_t(s.H), 0.0), r.dFuture.assign(size_t(s.H), 0.0);
  r.dFirst.assign(v.firstToken.empty() ? 0 : size_t(s.H), 0.0);
  auto at = [&](int part, int b, int h, int t, int d) {
    return double(__bfloat162float(in.qkv[fusedIndex(s, part, b, h, t, d)]));
  };
  auto dOut = [&](int b, int h, int t, int d) { return double(__bfloat162float(in.dO[headsIndex(s, b, h, t, d)])); };
  std::vector<double> prob(size_t(s.T)), mask(size_t(s.T)), dP(size_t(s.T));
  for (int b = 0; b < s.B; ++b)
    for (int h = 0; h < s.H; ++h) {
      const uint32_t batchHead = uint32_t(b * s.H + h);
      for (int i = 0; i < s.T; ++i) {
        double rowMax = -kInf;
        for (int j = 0; j < s.T; ++j) {
          double dot = 0;
          for (int d = 0; d < s.D; ++d) dot += at(0, b, h, i, d) * at(1, b, h, j, d);
          prob[size_t(j)] = scale * dot + referenceBias(v, h, i, j);
          rowMax = std::max(rowMax, prob[size_t(j)]);
        }
        double sum = 0;
        for (int j = 0; j < s.T; ++j) sum += std::exp(prob[size_t(j)] - rowMax);
        r.lse[size_t(batchHead) * s.T + i] = rowMax + std::log(sum);
        for (int j = 0; j < s.T; ++j) {
          prob[size_t(j)] = std::exp(prob[size_t(j)] - rowMax) / sum;
          mask[size_t(j)] = xtrap::tile::dropoutKeep(key, batchHead, i, j, threshold) ? keepScale : 0.0;
        }
        // O_i = sum_j P_ij mask_ij v_j; dP_ij = mask_ij dO_i . v_j; D_i = sum_j P_ij dP_ij.
        double rowDot = 0;
        for (int j = 0; j < s.T; ++j) {
          double dot = 0;
          for (int d = 0; d < s.D; ++d) dot += dOut(b, h, i, d) * at(2, b, h, j, d);
          dP[size_t(j)] = mask[size_t(j)] * dot;
          rowDot += prob[size_t(j)] * dP[size_t(j)];
          for (int d = 0; d < s.D; ++d) {
            r.o[headsIndex(s, b, h, i, d)] += prob[size_t(j)] * mask[size_t(j)] * at(2, b, h, j, d);
            r.dv[headsIndex(s, b, h, j, d)] += prob[size_t(j)] * mask[size_t(j)] * dOut(b, h, i, d);
          }
        }
        for (int j = 0; j < s.T; ++j) {
          const double dS = prob[size_t(j)] * (dP[size_t(j)] - rowDot);  // dL/dlogit = dL/dbias
          for (int d = 0; d < s.D; ++d) {
            r.dq[headsIndex(s, b, h, i, d)] += scale * dS * at(1, b, h, j, d);
            r.dk[headsIndex(s, b, h, j, d)] += scale * dS * at(0, b, h, i, d);
          }
          if (!v.firstToken.empty() && (i == 0 || j == 0))
            r.dFirst[size_t(h)] += dS;
          else if (j < i)
            r.dPast[size_t(h)] -= dS * (i - j);
          else if (j > i)
            r.dFuture[size_t(h)] -= dS * (j - i - double(v.shift));
        }
      }
    }
  return r;
}

float toFloat(float x) { return x; }
float toFloat(bf16 x) { return __bfloat162float(x); }

template <typename T>
std::vector<double> toDoubles(const Buffer<T>& buffer, size_t n) {
  std::vector<double> out(n);
  for (size_t i = 0; i < n; ++i) out[i] = double(toFloat(buffer[i]));
  return out;
}

// The kernels' forward and backward (of `scheme`), both with `products`, through their C++ API;
// FAILs on a launch error or fault.
Result runKernels(const Problem& p, const Inputs& in, xtrap::cuda::BackwardScheme scheme,
                  xtrap::cuda::TileProducts products = xtrap::cuda::TileProducts::WarpMma) {
  const AttentionShape& s = p.shape;
  const size_t n = size_t(s.B) * s.H * s.T * s.D, rows = size_t(s.B) * s.H * s.T;
  Buffer<bf16> qkv(in.qkv.size()), dO(n), o(n), dq(n), dk(n), dv(n);
  Buffer<float> lse(rows), past(size_t(s.H)), future(size_t(s.H)), first(size_t(s.H));
  Buffer<float> dPast(size_t(s.H)), dFuture(size_t(s.H)), dFirst(size_t(s.H)), rowWeights(3 * rows);
  Buffer<float> tileBounds(xtrap::cuda::linearBiasAttentionTileBoundsFloats(s));
  std::copy(in.qkv.begin(), in.qkv.end(), qkv.data());
  std::copy(in.dO.begin(), in.dO.end(), dO.data());
  for (int h = 0; h < s.H; ++h) {
    past[size_t(h)] = p.variant.past[size_t(h)], future[size_t(h)] = p.variant.future[size_t(h)];
    if (!p.variant.firstToken.empty()) first[size_t(h)] = p.variant.firstToken[size_t(h)];
  }
  const int64_t fusedRow = int64_t(3) * s.H * s.D;
  auto fusedView = [&](int part) {
    return HeadsView{qkv.data() + part * s.H * s.D, int64_t(s.T) * fusedRow, s.D, fusedRow};
  };
  auto headsView = [&](Buffer<bf16>& x) {
    return HeadsView{x.data(), int64_t(s.H) * s.T * s.D, int64_t(s.T) * s.D, s.D};
  };

  xtrap::cuda::LinearBiasArgs bias;
  bias.slopePast = past.data(), bias.slopeFuture = future.data();
  bias.firstTokenBias = p.variant.firstToken.empty() ? nullptr : first.data();
  bias.blockPast = p.variant.blockPast, bias.blockFuture = p.variant.blockFuture;
  bias.futureShift = p.variant.shift, bias.causal = p.variant.causal;
  const float scale = float(1.0 / std::sqrt(double(s.D)));

  xtrap::cuda::ForwardArgs fa;
  fa.shape = s, fa.q = fusedView(0), fa.k = fusedView(1), fa.v = fusedView(2), fa.o = headsView(o);
  fa.lse = lse.data(), fa.bias = bias, fa.scale = scale, fa.dropout = p.dropout;
  // The generator's state as a graph holds it (offset 8 of p.offset within the graph), and the
  // forward's record of what it used.
  Buffer<int64_t> generator(2), resolvedRng(2);
  generator[0] = int64_t(p.seed), generator[1] = int64_t(p.offset - 8);
  if (p.capturedRng) {
    fa.rng.captured = true, fa.rng.seedPtr = generator.data(), fa.rng.offsetPtr = generator.data() + 1;
    fa.rng.offsetIntragraph = 8;
  } else {
    fa.rng.seed = p.seed, fa.rng.offset = p.offset;
  }
  fa.resolvedRng = resolvedRng.data();
  // The AtomicDq backward's bias gradients need the forward's row weights (as the glue asks for them).
  const bool biasGrads = p.slopeGradients || !p.variant.firstToken.empty();
  if (scheme == xtrap::cuda::BackwardScheme::AtomicDq && biasGrads) fa.rowWeights = rowWeights.data();
  if (p.negligibleTiles) fa.tileBounds = tileBounds.data();
  fa.products = products;
  cudaError_t e = xtrap::cuda::linearBiasAttentionForward(fa, nullptr);
  INFO("forward: " << cuda_emulation::lastFault());
  REQUIRE(e == cudaSuccess);
  if (p.dropout > 0) {  // the backward reads the mask's state from the forward's record
    CHECK(resolvedRng[0] == int64_t(p.seed));
    CHECK(resolvedRng[1] == int64_t(p.offset));
  }

  xtrap::cuda::BackwardArgs ba;
  ba.shape = s, ba.q = fa.q, ba.k = fa.k, ba.v = fa.v, ba.o = fa.o, ba.dO = headsView(dO), ba.lse = lse.data();
  ba.dq = headsView(dq), ba.dk = headsView(dk), ba.dv = headsView(dv);
  ba.dSlopePast = p.slopeGradients ? dPast.data() : nullptr;
  ba.dSlopeFuture = p.slopeGradients ? dFuture.data() : nullptr;
  ba.dFirstTokenBias = p.variant.firstToken.empty() ? nullptr : dFirst.data();
  ba.bias = bias, ba.scale = scale, ba.dropout = p.dropout, ba.scheme = scheme;
  ba.rng.captured = true, ba.rng.seedPtr = resolvedRng.data(), ba.rng.offsetPtr = resolvedRng.data() + 1;
  ba.rowWeights = fa.rowWeights, ba.tileBounds = fa.tileBounds, ba.products = products;
  Buffer<unsigned char> workspace(xtrap::cuda::linearBiasAttentionBackwardWorkspace(ba));
  e = xtrap::cuda::linearBiasAttentionBackward(ba, workspace.data(), nullptr);
  INFO("backward: " << cuda_emulation::lastFault());
  REQUIRE(e == cudaSuccess);

  for (bool intact :
       {qkv.guardIntact(), dO.guardIntact(), o.guardIntact(), dq.guardIntact(), dk.guardIntact(), dv.guardIntact(),
        lse.guardIntact(), dPast.guardIntact(), dFuture.guardIntact(), dFirst.guardIntact(), rowWeights.guardIntact(),
        tileBounds.guardIntact(), workspace.guardIntact(), generator.guardIntact(), resolvedRng.guardIntact()})
    REQUIRE(intact);  // no write past the end of a buffer
  Result r;
  r.o = toDoubles(o, n), r.lse = toDoubles(lse, rows), r.dq = toDoubles(dq, n), r.dk = toDoubles(dk, n);
  for (double& x : r.lse) x *= std::log(2.0);  // the kernel's is in base 2
  r.dv = toDoubles(dv, n);
  if (p.slopeGradients) r.dPast = toDoubles(dPast, size_t(s.H)), r.dFuture = toDoubles(dFuture, size_t(s.H));
  if (!p.variant.firstToken.empty()) r.dFirst = toDoubles(dFirst, size_t(s.H));
  if (p.negligibleTiles) {
    const auto* bounds = reinterpret_cast<const xtrap::tile::TileBound*>(tileBounds.data());
    r.tileBounds.assign(bounds, bounds + size_t(s.B) * s.H * ((s.T + 63) / 64));
  }
  return r;
}

// max |got - reference| / max(max |reference|, floor), the GPU test's measure.
double relativeMaxDiff(const std::vector<double>& reference, const std::vector<double>& got, double floor) {
  REQUIRE(reference.size() == got.size());
  double worst = 0, largest = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (!std::isfinite(got[i])) return kInf;
    worst = std::max(worst, std::abs(got[i] - reference[i]));
    largest = std::max(largest, std::abs(reference[i]));
  }
  return worst / std::max(largest, floor);
}

// The GPU test's tolerances: bf16 keeps 8 significant bits; the kernels round P and dS to bf16 for
// their matmuls and round their outputs once (2e-2 of the largest element, absolute below 1e-3).
// The log-sum-exp is fp32 throughout: 1e-4. The bias gradients are fp32 dS summed in fp64 and
// corrected for the rounding of D_i (tile::RowTerm): here they come within 4e-6 of the largest
// head's (absolute below 1e-2), so they are held to 1e-4, which a wrong sign in the correction's
// weights (1e-3 off) fails; the GPU test keeps the 1e-2.
void compare(const Result& want, const Result& got) {
  CHECK(relativeMaxDiff(want.o, got.o, 1e-3) <= 2e-2);
  CHECK(relativeMaxDiff(want.lse, got.lse, 1.0) <= 1e-4);
  CHECK(relativeMaxDiff(want.dq, got.dq, 1e-3) <= 2e-2);
  CHECK(relativeMaxDiff(want.dk, got.dk, 1e-3) <= 2e-2);
  CHECK(relativeMaxDiff(want.dv, got.dv, 1e-3) <= 2e-2);
  if (!got.dPast.empty()) {
    CHECK(relativeMaxDiff(want.dPast, got.dPast, 1e-2) <= 1e-4);
    CHECK(relativeMaxDiff(want.dFuture, got.dFuture, 1e-2) <= 1e-4);
  }
  if (!got.dFirst.empty()) CHECK(relativeMaxDiff(want.dFirst, got.dFirst, 1e-2) <= 1e-4);
}

// Runs p with each backward scheme under both schedules, requires bit-identical results from the
// two schedules and compares each with the reference. The schemes share the forward and the dK, dV
// code: o, lse, dk and dv must agree bit for bit. dq (AtomicDq sums its fp32 terms in another order;
// here, where blocks run one after the other, a fixed one) and the bias gradients (centred sums
// rather than corrected ones) are the reference's within compare's tolerances.
void check(const Problem& p) {
  const AttentionShape& s = p.shape;
  INFO(p.variant.name << " B=" << s.B << " H=" << s.H << " T=" << s.T << " D=" << s.D << " dropout=" << p.dropout
                      << " offset=" << p.offset << (p.capturedRng ? " captured" : ""));
  const Inputs in = makeInputs(s, p.seed);
  const Result want = reference(p, in);
  Result got[2];
  for (xtrap::cuda::BackwardScheme scheme :
       {xtrap::cuda::BackwardScheme::TwoPass, xtrap::cuda::BackwardScheme::AtomicDq}) {
    INFO("backward scheme " << int(scheme));
    cuda_emulation::setSchedule(cuda_emulation::Schedule::Ascending);
    const Result ascending = runKernels(p, in, scheme);
    cuda_emulation::setSchedule(cuda_emulation::Schedule::Descending);
    const Result descending = runKernels(p, in, scheme);
    cuda_emulation::setSchedule(cuda_emulation::Schedule::Ascending);
    CHECK(ascending == descending);  // else a thread reads what another writes without a barrier
    compare(want, ascending);
    got[int(scheme)] = ascending;
  }
  CHECK(got[0].o == got[1].o);
  CHECK(got[0].lse == got[1].lse);
  CHECK(got[0].dk == got[1].dk);
  CHECK(got[0].dv == got[1].dv);
  // The warpgroup MMA products (the forward and the two-pass backward), under both schedules
  // (products computed at their wait, or at their issue): every result the mma.sync kernels'.
  for (cuda_emulation::Schedule schedule :
       {cuda_emulation::Schedule::Ascending, cuda_emulation::Schedule::Descending}) {
    INFO("warpgroup MMA products, schedule " << int(schedule));
    cuda_emulation::setSchedule(schedule);
    const Result warpgroup =
        runKernels(p, in, xtrap::cuda::BackwardScheme::TwoPass, xtrap::cuda::TileProducts::WarpgroupMma);
    cuda_emulation::setSchedule(cuda_emulation::Schedule::Ascending);
    CHECK(warpgroup == got[0]);
  }
  // And with AtomicDq (the forward summing the row weights its bias gradients ask for, keyGrad's dS K
  // from its dS^T tile): the AtomicDq results.
  const Result mixed =
      runKernels(p, in, xtrap::cuda::BackwardScheme::AtomicDq, xtrap::cuda::TileProducts::WarpgroupMma);
  CHECK(mixed == got[1]);
}

// Toy kernels for the emulation's own checks. Thread t writes slot t of `shared` (global memory
// stands in: the threads of a block interleave only where they wait), then reads slot t + 1.
template <bool kBarrier>
__global__ void neighbourKernel(float* shared, float* out) {
  const int t = int(threadIdx.x), n = int(blockDim.x);
  shared[t] = float(t + 1);
  if (kBarrier) __syncthreads();
  out[t] = shared[(t + 1) % n];
}

// Half a warp at __syncwarp, the other half at __syncthreads: neither barrier can complete.
__global__ void divergentBarrierKernel() {
  if (threadIdx.x % 32 < 16)
    __syncwarp();
  else
    __syncthreads();
}

// One warp: ab = a b and abT = a b^T of two row-major bf16 16 x 16 matrices, copied into shared
// memory and multiplied through ldmatrix (.trans for b, plain for b^T) and mma.sync, the outputs
// written from warp_mma.cuh's documented C layout.
__global__ void productKernel(const bf16* a, const bf16* b, float* ab, float* abT) {
  constexpr int kRow = 24;  // elements: 48-byte rows, 16-byte aligned
  bf16* as = reinterpret_cast<bf16*>(cuda_emulation::sharedMemory());
  bf16* bs = as + 16 * kRow;
  const int lane = int(threadIdx.x), r = lane & 7, m = lane >> 3, g = lane >> 2, t = lane & 3;
  for (int x = lane; x < 256; x += 32) as[x / 16 * kRow + x % 16] = a[x], bs[x / 16 * kRow + x % 16] = b[x];
  __syncwarp();
  uint32_t fa[4], fb[4], fbT[4];
  xtrap::cuda::mma::loadMatrices(fa, as + (r + 8 * (m & 1)) * kRow + 8 * (m >> 1));
  xtrap::cuda::mma::loadMatricesTransposed(fb, bs + (r + 8 * (m & 1)) * kRow + 8 * (m >> 1));
  xtrap::cuda::mma::loadMatrices(fbT, bs + (r + 8 * (m >> 1)) * kRow + 8 * (m & 1));
  float accB[2][4] = {}, accBT[2][4] = {};
  for (int n = 0; n < 2; ++n) {
    xtrap::cuda::mma::multiplyAdd(accB[n], fa, fb[2 * n], fb[2 * n + 1]);
    xtrap::cuda::mma::multiplyAdd(accBT[n], fa, fbT[2 * n], fbT[2 * n + 1]);
  }
  for (int n = 0; n < 2; ++n)
    for (int e = 0; e < 4; ++e) {
      const int at = (g + 8 * (e >> 1)) * 16 + 8 * n + 2 * t + (e & 1);
      ab[at] = accB[n][e];
      abT[at] = accBT[n][e];
    }
}

// One warpgroup: c = a b^T and c2 = a b2 for a (64, 16), b (64, 16), b2 (16, 64) row-major bf16,
// and c3 = a b^T again by the product that overwrites its accumulators (which hold 1e30 before it),
// copied into shared memory as core-matrix tiles (core_matrix_tile.h: b2's rows, along K, as the
// first 16 of a 64-row tile's rows) and multiplied by warpgroup_mma.cuh's two products; the outputs written from its
// documented accumulator layout. c3's product is a second group: c and c2 are written after
// wait<1>(), c3 after wait<0>(). kLeftOut names what a wrong kernel leaves out (Wait: the last wait;
// KeepA: c2's A registers kept until its wait).
enum class LeftOut { Nothing, Fence, Wait, ProxyFence, LastWarpsProduct, KeepA };
template <LeftOut kLeftOut = LeftOut::Nothing>
__global__ void warpgroupProductKernel(const bf16* a, const bf16* b, const bf16* b2, float* c, float* c2, float* c3) {
  namespace core = xtrap::cuda::core;
  namespace wgmma = xtrap::cuda::wgmma;
  bf16* as = reinterpret_cast<bf16*>(cuda_emulation::sharedMemory());
  bf16 *bs = as + 64 * 16, *b2s = bs + 64 * 16;
  const int x = int(threadIdx.x), warp = x / 32, lane = x % 32, g = lane / 4, t = lane % 4;
  for (int e = x; e < 64 * 16; e += 128) {
    as[core::offset(e / 16, e % 16)] = a[e], bs[core::offset(e / 16, e % 16)] = b[e];
    b2s[core::offset(e / 64, e % 64)] = b2[e];
  }
  if (kLeftOut != LeftOut::ProxyFence) wgmma::fenceSharedWrites();
  __syncthreads();
  float acc[8][4] = {}, acc2[8][4] = {}, acc3[8][4];
  for (auto& fragment : acc3)
    for (float& x : fragment) x = 1e30f;
  uint32_t fa[4];  // this warp's rows of a as mma.sync's A fragment
  auto pair = [&](int row, int col) {
    return uint32_t(a[row * 16 + col].bits) | (uint32_t(a[row * 16 + col + 1].bits) << 16);
  };
  const int row = 16 * warp + g;
  fa[0] = pair(row, 2 * t), fa[1] = pair(row + 8, 2 * t), fa[2] = pair(row, 2 * t + 8),
  fa[3] = pair(row + 8, 2 * t + 8);
  if (kLeftOut != LeftOut::Fence) wgmma::arrive();
  wgmma::multiplyAdd(acc, wgmma::descriptor(as, core::kChunkBytes, core::kRowGroupBytes),
                     wgmma::descriptor(bs, core::kChunkBytes, core::kRowGroupBytes));
  if (kLeftOut != LeftOut::LastWarpsProduct || warp < 3)
    wgmma::multiplyAdd(acc2, fa, wgmma::descriptor(b2s, core::kRowGroupBytes, core::kChunkBytes));
  wgmma::commit();
  wgmma::multiply(acc3, wgmma::descriptor(as, core::kChunkBytes, core::kRowGroupBytes),
                  wgmma::descriptor(bs, core::kChunkBytes, core::kRowGroupBytes));
  wgmma::commit();
  if (kLeftOut == LeftOut::KeepA) fa[0] = 0;
  auto write = [&](float* out, const float(&d)[8][4]) {
    for (int n = 0; n < 8; ++n)
      for (int e = 0; e < 4; ++e) out[(row + 8 * (e >> 1)) * 64 + 8 * n + 2 * t + (e & 1)] = d[n][e];
  };
  wgmma::wait<1>();
  write(c, acc);
  write(c2, acc2);
  if (kLeftOut != LeftOut::Wait) wgmma::wait();
  write(c3, acc3);
}

// Thread 0 copies a float into shared memory asynchronously and reads it before and after waiting.
__global__ void unwaitedCopyKernel(const float* in, float* out) {
  if (threadIdx.x != 0) return;
  float* shared = reinterpret_cast<float*>(cuda_emulation::sharedMemory());
  shared[0] = -1.f;
  __pipeline_memcpy_async(shared, in, sizeof(float));
  __pipeline_commit();
  out[0] = shared[0];  // without waiting: either value is possible
  __pipeline_wait_prior(0);
  out[1] = shared[0];
}

__global__ void misalignedRowKernel() {
  uint32_t r[4];
  xtrap::cuda::mma::loadMatrices(r, reinterpret_cast<bf16*>(cuda_emulation::sharedMemory()) + 1);
}

cudaLaunchConfig_t oneBlock(unsigned threads) {
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(1);
  config.blockDim = dim3(threads);
  return config;
}

// out of neighbourKernel<kBarrier> over 64 threads under a schedule.
template <bool kBarrier>
std::vector<float> neighbours(cuda_emulation::Schedule schedule) {
  std::vector<float> shared(64, 0.f), out(64, -1.f);
  const cudaLaunchConfig_t config = oneBlock(64);
  cuda_emulation::setSchedule(schedule);
  const cudaError_t e = cudaLaunchKernelEx(&config, neighbourKernel<kBarrier>, shared.data(), out.data());
  cuda_emulation::setSchedule(cuda_emulation::Schedule::Ascending);
  REQUIRE(e == cudaSuccess);
  return out;
}

}  // namespace

// What the kernel tests below rely on: a missing barrier or wait for an asynchronous copy changes
// the result between the two schedules, a barrier nobody can pass or a misaligned ldmatrix row
// fails the launch, and the emulated ldmatrix and mma.sync multiply matrices.
TEST_CASE("the CUDA emulation finds missing barriers and waits, deadlocks and misaligned rows", "[cuda_emulation]") {
  using cuda_emulation::Schedule;
  std::vector<float> expected(64);
  for (int t = 0; t < 64; ++t) expected[size_t(t)] = float((t + 1) % 64 + 1);
  CHECK(neighbours<true>(Schedule::Ascending) == expected);
  CHECK(neighbours<true>(Schedule::Descending) == expected);
  CHECK(neighbours<false>(Schedule::Ascending) != neighbours<false>(Schedule::Descending));

  const cudaLaunchConfig_t config = oneBlock(64);
  CHECK(cudaLaunchKernelEx(&config, divergentBarrierKernel) == cudaErrorLaunchFailure);
  CHECK(cuda_emulation::lastFault().find("deadlock") != std::string::npos);
  cudaLaunchConfig_t warp = oneBlock(32);
  warp.dynamicSmemBytes = 1024;
  CHECK(cudaLaunchKernelEx(&warp, misalignedRowKernel) == cudaErrorLaunchFailure);
  CHECK(cuda_emulation::lastFault().find("16-byte aligned") != std::string::npos);
  cudaGetLastError();  // the launches' errors are this test's, not the next one's

  // An asynchronous copy read before its wait: the old value under one schedule, the new under the other.
  const float in = 7.f;
  std::vector<float> out[2] = {{0.f, 0.f}, {0.f, 0.f}};
  for (Schedule schedule : {Schedule::Ascending, Schedule::Descending}) {
    cuda_emulation::setSchedule(schedule);
    REQUIRE(cudaLaunchKernelEx(&warp, unwaitedCopyKernel, &in, out[int(schedule)].data()) == cudaSuccess);
  }
  cuda_emulation::setSchedule(Schedule::Ascending);
  CHECK(out[int(Schedule::Ascending)] == std::vector<float>{-1.f, 7.f});
  CHECK(out[int(Schedule::Descending)] == std::vector<float>{7.f, 7.f});
}

TEST_CASE("the emulated ldmatrix and mma.sync multiply two matrices", "[cuda_emulation]") {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> uniform(-1.f, 1.f);
  std::vector<bf16> a(256), b(256);
  for (size_t x = 0; x < 256; ++x) a[x] = __float2bfloat16(uniform(rng)), b[x] = __float2bfloat16(uniform(rng));
  std::vector<float> ab(256, NAN), abT(256, NAN);
  cudaLaunchConfig_t warp = oneBlock(32);
  warp.dynamicSmemBytes = 2 * 16 * 24 * sizeof(bf16);
  REQUIRE(cudaLaunchKernelEx(&warp, productKernel, a.data(), b.data(), ab.data(), abT.data()) == cudaSuccess);
  auto at = [](const std::vector<bf16>& x, int row, int col) {
    return double(__bfloat162float(x[size_t(row * 16 + col)]));
  };
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 16; ++j) {
      double product = 0, productT = 0;
      for (int k = 0; k < 16; ++k) product += at(a, i, k) * at(b, k, j), productT += at(a, i, k) * at(b, j, k);
      INFO("element (" << i << ", " << j << ")");
      CHECK(ab[size_t(i * 16 + j)] == Approx(product).margin(1e-5));
      CHECK(abT[size_t(i * 16 + j)] == Approx(productT).margin(1e-5));
    }
}

TEST_CASE("the emulated warpgroup MMA multiplies two matrices from core-matrix tiles", "[cuda_emulation]") {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> uniform(-1.f, 1.f);
  std::vector<bf16> a(64 * 16), b(64 * 16), b2(16 * 64);
  for (auto* m : {&a, &b, &b2})
    for (bf16& e : *m) e = __float2bfloat16(uniform(rng));
  auto at = [](const std::vector<bf16>& m, int cols, int row, int col) {
    return double(__bfloat162float(m[size_t(row * cols + col)]));
  };
  cudaLaunchConfig_t group = oneBlock(128);
  group.dynamicSmemBytes = (2 * 64 * 16 + 64 * 64) * sizeof(bf16);
  for (cuda_emulation::Schedule schedule :
       {cuda_emulation::Schedule::Ascending, cuda_emulation::Schedule::Descending}) {
    cuda_emulation::setSchedule(schedule);
    std::vector<float> c(64 * 64, NAN), c2(64 * 64, NAN), c3(64 * 64, NAN);
    REQUIRE(cudaLaunchKernelEx(&group, warpgroupProductKernel<>, a.data(), b.data(), b2.data(), c.data(), c2.data(),
                               c3.data()) == cudaSuccess);
    for (int i = 0; i < 64; ++i)
      for (int j = 0; j < 64; ++j) {
        double product = 0, product2 = 0;
        for (int k = 0; k < 16; ++k)
          product += at(a, 16, i, k) * at(b, 16, j, k), product2 += at(a, 16, i, k) * at(b2, 64, k, j);
        INFO("schedule " << int(schedule) << " element (" << i << ", " << j << ")");
        CHECK(c[size_t(i * 64 + j)] == Approx(product).margin(1e-5));
        CHECK(c2[size_t(i * 64 + j)] == Approx(product2).margin(1e-5));
        CHECK(c3[size_t(i * 64 + j)] == Approx(product).margin(1e-5));
      }
    // Without wgmma.fence, the wait, the proxy fence after the stores, with a warp that skips a
    // product, or with an A in registers changed while its product is in flight, the launch faults.
    std::vector<float> ignored(64 * 64);
    auto faultOf = [&](auto kernel) {
      const cudaError_t e = cudaLaunchKernelEx(&group, kernel, a.data(), b.data(), b2.data(), ignored.data(),
                                               ignored.data(), ignored.data());
      return e == cudaErrorLaunchFailure ? cuda_emulation::lastFault() : std::string("no fault");
    };
    CHECK_THAT(faultOf(warpgroupProductKernel<LeftOut::Fence>), Catch::Contains("without wgmma.fence"));
    CHECK_THAT(faultOf(warpgroupProductKernel<LeftOut::Wait>), Catch::Contains("never waited for"));
    // There wait<1>() left c3's group in flight: under the ascending schedule (products computed at
    // the wait) c3 still holds the NaN of an overwriting product not yet done, c is done.
    if (schedule == cuda_emulation::Schedule::Ascending) {
      std::vector<float> early(64 * 64), late(64 * 64);
      cudaLaunchKernelEx(&group, warpgroupProductKernel<LeftOut::Wait>, a.data(), b.data(), b2.data(), early.data(),
                         ignored.data(), late.data());
      CHECK(std::all_of(late.begin(), late.end(), [](float x) { return std::isnan(x); }));
      CHECK(early == c);  // checked against the reference above
    }
    CHECK_THAT(faultOf(warpgroupProductKernel<LeftOut::ProxyFence>), Catch::Contains("fence.proxy.async"));
    CHECK_THAT(faultOf(warpgroupProductKernel<LeftOut::LastWarpsProduct>),
               Catch::Contains("issued different warpgroup instructions"));
    CHECK_THAT(faultOf(warpgroupProductKernel<LeftOut::KeepA>), Catch::Contains("A registers changed"));
    cudaGetLastError();
  }
  cuda_emulation::setSchedule(cuda_emulation::Schedule::Ascending);
}

// The GPU test's probe of the warpgroup MMA's products (linearBiasAttentionProbeWarpgroupProducts)
// gives each product of bf16 tiles here as a double-precision product does (fp32 sums of exact bf16
// products: within 1e-5 at K 64 and 128), D 64 and 128, under both schedules.
TEST_CASE("the warpgroup MMA's product probe gives each product of the kernels", "[cuda_emulation]") {
  std::mt19937 rng(23);
  std::uniform_real_distribution<float> uniform(-1.f, 1.f);
  for (int D : {64, 128})
    for (cuda_emulation::Schedule schedule :
         {cuda_emulation::Schedule::Ascending, cuda_emulation::Schedule::Descending}) {
      INFO("D " << D << " schedule " << int(schedule));
      cuda_emulation::setSchedule(schedule);
      std::vector<bf16> q(64 * size_t(D)), k(64 * size_t(D)), v(64 * size_t(D)), pm(64 * 64);
      for (std::vector<bf16>* m : {&q, &k, &v, &pm})
        for (bf16& e : *m) e = __float2bfloat16(uniform(rng));
      // sFromZero holds 1e30 before: the product overwrites it. dq: 16-byte aligned (vector adds).
      std::vector<float> sOut(64 * 64), sFromZero(64 * 64, 1e30f), o(64 * size_t(D));
      Buffer<float> dq(64 * size_t(D));
      xtrap::cuda::WarpgroupProductsProbe probe;
      probe.D = D, probe.q = q.data(), probe.k = k.data(), probe.v = v.data(), probe.p = pm.data();
      probe.s = sOut.data(), probe.sFromZero = sFromZero.data(), probe.o = o.data(), probe.dq = dq.data();
      REQUIRE(xtrap::cuda::linearBiasAttentionProbeWarpgroupProducts(probe, nullptr) == cudaSuccess);
      auto at = [](const std::vector<bf16>& m, int cols, int row, int col) {
        return double(__bfloat162float(m[size_t(row) * cols + col]));
      };
      double worst[4] = {};
      for (int i = 0; i < 64; ++i) {
        for (int j = 0; j < 64; ++j) {
          double qk = 0;
          for (int d = 0; d < D; ++d) qk += at(q, D, i, d) * at(k, D, j, d);
          worst[0] = std::max(worst[0], std::abs(sOut[size_t(i) * 64 + j] - qk));
          worst[1] = std::max(worst[1], std::abs(sFromZero[size_t(i) * 64 + j] - qk));
        }
        for (int d = 0; d < D; ++d) {
          double pv = 0, ptk = 0;
          for (int j = 0; j < 64; ++j)
            pv += at(pm, 64, i, j) * at(v, D, j, d), ptk += at(pm, 64, j, i) * at(k, D, j, d);
          worst[2] = std::max(worst[2], std::abs(o[size_t(i) * D + d] - pv));
          worst[3] = std::max(worst[3], std::abs(dq.data()[size_t(i) * D + d] - ptk));
        }
      }
      CHECK(worst[0] < 1e-5);
      CHECK(worst[1] < 1e-5);
      CHECK(worst[2] < 1e-5);
      CHECK(worst[3] < 1e-5);
    }
  cuda_emulation::setSchedule(cuda_emulation::Schedule::Ascending);
}

TEST_CASE("fused ALiBi attention kernels (CPU emulation): every variant, tail tiles, D 64", "[cuda_emulation]") {
  for (const Variant& v : variants(2))
    for (int T : {1, 7, 64, 65, 130})
      check({{2, 2, T, 64}, v, 0.f, 0x1234'5678'9abcULL + uint64_t(T), learnsSlopes(v)});
}

// Here every variant asks for slope gradients too (the fixed-slope ones as if learned): the kernel's
// path with bias gradients on causal, shifted and one-sided (blocked) cells. And one without.
TEST_CASE("fused ALiBi attention kernels (CPU emulation): every variant with slope gradients, D 128",
          "[cuda_emulation]") {
  for (const Variant& v : variants(2)) check({{1, 2, 70, 128}, v, 0.f, 0x2468'ace0ULL, true});
  check({{1, 2, 70, 128}, variants(2)[1], 0.f, 0x2468'ace0ULL, false});
}

// T 200 has pairs of whole tiles off the diagonal away from row and column 0 (64-127 by 128-191
// and back): linear tiles (tile::linearTile) for every variant, bialibi's too, whose logits and
// bias gradients take the kernels' linear path.
TEST_CASE("fused ALiBi attention kernels (CPU emulation): every variant with slope gradients on linear tiles, D 64",
          "[cuda_emulation]") {
  for (const Variant& v : variants(2)) check({{1, 2, 200, 64}, v, 0.f, 0x1357'9bdfULL, true});
}

// v with its slopes times 8 (4 down to 0.5 for H = 2): steep enough that at T 330 the pairs two or
// three 64-row tiles apart are negligible (tile::negligibleTile), as far pairs of long sequences
// are with ALiBi's slopes.
Variant steep(Variant v) {
  for (float& m : v.past) m *= 8.f;
  for (float& m : v.future) m *= 8.f;
  return v;
}

// Negligible pairs skipped: every variant against the reference as above, and with the bounds left
// out (every open pair computed).
TEST_CASE("fused ALiBi attention kernels (CPU emulation): steep slopes, negligible pairs skipped, D 64",
          "[cuda_emulation]") {
  for (const Variant& v : variants(2)) check({{1, 2, 330, 64}, steep(v), 0.f, 0x5eed'0330ULL, true});
  Problem dense{{1, 2, 330, 64}, steep(variants(2)[0]), 0.f, 0x5eed'0330ULL, true};
  dense.negligibleTiles = false;
  check(dense);
  // At T 2200 (35 tiles) causal walks skip up to 32 negligible tiles in a row at their far end:
  // the first or last tile they visit is found past one warp's 32 tests at once.
  check({{1, 2, 2200, 64}, steep(variants(2)[0]), 0.f, 0x5eed'2200ULL, false});
}

// A head whose bias cannot make a pair negligible within T is not read for bounds
// (tile::biasCanReachNegligible): causal, H 2, T 330 (6 tiles), the farthest pair's nearest cell is
// 257 apart. Head 0's slope 0.5 makes its bias -128.5 there, below -136 ln 2 = -94.3: its tiles'
// bounds are q's and k's. Head 1's 0.177 makes it -45.4: its bounds are NaN (skip nothing), and the
// results are the reference's all the same.
TEST_CASE("fused ALiBi attention kernels (CPU emulation): tile bounds only of heads whose bias can reach",
          "[cuda_emulation]") {
  const Problem p{{1, 2, 330, 64}, variants(2)[0], 0.f, 0x0330'0002ULL, false};
  check(p);
  const Result r = runKernels(p, makeInputs(p.shape, p.seed), xtrap::cuda::BackwardScheme::TwoPass);
  REQUIRE(r.tileBounds.size() == 12);
  for (int t = 0; t < 6; ++t) {
    INFO("tile " << t);
    const xtrap::tile::TileBound &head0 = r.tileBounds[size_t(t)], &head1 = r.tileBounds[size_t(6 + t)];
    CHECK((head0.queryNorm > 0.f && head0.keyNorm > 0.f && std::isfinite(head0.diagonal)));
    CHECK((std::isnan(head1.queryNorm) && std::isnan(head1.keyNorm) && std::isnan(head1.diagonal)));
  }
}

// That the pairs are skipped, not computed and found to add nothing: v of key tile 0 (keys 0-63)
// is NaN, which any pair computed with it spreads to its query rows (0 x NaN). Rows from 192 on,
// whose pairs with key tile 0 are negligible for both heads, stay finite, and equal the reference's
// with those v rows 0; so do their dq (their dS with those keys is 0, not computed).
TEST_CASE("fused ALiBi attention kernels (CPU emulation): negligible pairs are never computed", "[cuda_emulation]") {
  const std::vector<Variant> all = variants(2);
  for (const Variant& v : {steep(all[0]), steep(all[1])}) {
    const Problem p{{1, 2, 330, 64}, v, 0.f, 0x0bad'f00dULL, false};
    const AttentionShape& s = p.shape;
    INFO(v.name);
    Inputs in = makeInputs(s, p.seed), zeroed = in;
    for (int h = 0; h < s.H; ++h)
      for (int t = 0; t < 64; ++t)
        for (int d = 0; d < s.D; ++d) {
          in.qkv[fusedIndex(s, 2, 0, h, t, d)] = __float2bfloat16(NAN);
          zeroed.qkv[fusedIndex(s, 2, 0, h, t, d)] = __float2bfloat16(0.f);
        }
    const Result want = reference(p, zeroed);
    for (xtrap::cuda::BackwardScheme scheme :
         {xtrap::cuda::BackwardScheme::TwoPass, xtrap::cuda::BackwardScheme::AtomicDq}) {
      INFO("backward scheme " << int(scheme));
      const Result got = runKernels(p, in, scheme);
      // Rows 192 to 329 of each head.
      auto farRows = [&](const std::vector<double>& x) {
        std::vector<double> rows;
        for (int h = 0; h < s.H; ++h)
          for (int t = 192; t < s.T; ++t)
            for (int d = 0; d < s.D; ++d) rows.push_back(x[headsIndex(s, 0, h, t, d)]);
        return rows;
      };
      CHECK(relativeMaxDiff(farRows(want.o), farRows(got.o), 1e-3) <= 2e-2);  // infinite where not finite
      CHECK(relativeMaxDiff(farRows(want.dq), farRows(got.dq), 1e-3) <= 2e-2);
    }
  }
}

// The forward moves a row's running max only when a row of its warp finds a logit more than
// kRescaleSlack (8, base 2) above its own; until then P may exceed 1. Here one row of warp 0 (rows
// 0-15), alone, must: query row 1 or 9 (a lane's first or second row) meets key 5 with a base-2
// logit of 162, after the walk's first tile (keys 64-127: the forward walks from the last) gave it at
// most about 11. The warp's other rows vary by about a unit from tile to tile. Without the
// rescaling, the row's P would overflow fp32 (2^128).
TEST_CASE("fused ALiBi attention kernels (CPU emulation): a row whose max rises by 2^150 alone in its warp",
          "[cuda_emulation]") {
  const Variant flat{"symmetric", false, {1e-3f}, {1e-3f}, {}, 0, 0, 0.f};
  const Problem p{{1, 1, 128, 64}, flat, 0.f, 0x9e15'ca1eULL, false};
  const AttentionShape& s = p.shape;
  for (int row : {1, 9}) {
    INFO("query row " << row);
    Inputs in = makeInputs(s, p.seed);
    auto at = [&](int part, int t, int d) -> bf16& { return in.qkv[fusedIndex(s, part, 0, 0, t, d)]; };
    for (int t = 0; t < 16; ++t)
      for (int d = 0; d < s.D; ++d)  // q . k_5 = 0, and small logits elsewhere: no rise past 8
        at(0, t, d) = __float2bfloat16(d == 0 ? 0.f : 0.25f * __bfloat162float(at(0, t, d)));
    for (int d = 0; d < s.D; ++d) {
      at(0, row, d) = __float2bfloat16(d == 0 ? 30.f : 0.f);  // q . k_j = 30 k_j[0], at most 60
      at(1, 5, d) = __float2bfloat16(d == 0 ? 30.f : 0.f);    // q . k_5 = 900: 900 / 8 log2(e) = 162
    }
    const Result want = reference(p, in), got = runKernels(p, in, xtrap::cuda::BackwardScheme::TwoPass);
    CHECK(relativeMaxDiff(want.o, got.o, 1e-3) <= 2e-2);
    CHECK(relativeMaxDiff(want.lse, got.lse, 1.0) <= 1e-4);
    CHECK(relativeMaxDiff(want.dq, got.dq, 1e-3) <= 2e-2);
  }
}

TEST_CASE("fused ALiBi attention kernels (CPU emulation): dropout's mask is the same in the backward",
          "[cuda_emulation]") {
  const std::vector<Variant> all = variants(2);
  for (const Variant& v : {all[0], all[5]}) {
    check({{2, 2, 100, 64}, v, 0.25f, 0x9e37'79b9ULL, learnsSlopes(v)});
    check({{1, 2, 70, 128}, v, 0.25f, 0x9e37'79b9ULL, learnsSlopes(v)});
    // Read through pointers, as in a CUDA graph: the same mask for the same (seed, offset), and
    // another offset's (another replay's) in the reference.
    check({{1, 2, 70, 64}, v, 0.25f, 0x9e37'79b9ULL, learnsSlopes(v), true, 36, true});
    check({{1, 2, 70, 64}, v, 0.25f, 0x9e37'79b9ULL, learnsSlopes(v), true, 40, true});
  }
}

TEST_CASE("fused ALiBi attention kernels (CPU emulation): launch checks", "[cuda_emulation]") {
  CHECK(xtrap::cuda::linearBiasAttentionCheck({1, 2, 8, 96}, 0.f) != nullptr);
  CHECK(xtrap::cuda::linearBiasAttentionCheck({1, 65, 8, 64}, 0.f) != nullptr);
  CHECK(xtrap::cuda::linearBiasAttentionCheck({1, 2, 8, 64}, 1.f) != nullptr);
  CHECK(xtrap::cuda::linearBiasAttentionDeviceCheck(0, 128) == nullptr);  // the emulated H100 fits D=128
  xtrap::cuda::ForwardArgs misaligned;
  misaligned.shape = {1, 1, 8, 64};
  CHECK(xtrap::cuda::linearBiasAttentionForward(misaligned, nullptr) == cudaErrorInvalidValue);
  xtrap::cuda::ForwardArgs empty;  // T = 0: a valid call has nothing to do
  empty.shape = {1, 1, 0, 128};
  CHECK(xtrap::cuda::linearBiasAttentionForward(empty, nullptr) == cudaSuccess);
  empty.shape.D = 64;
  CHECK(xtrap::cuda::linearBiasAttentionForward(empty, nullptr) == cudaSuccess);
  // The AtomicDq backward with bias gradients needs the forward's row weights; TwoPass does not.
  Buffer<bf16> x(8 * 64);
  Buffer<float> lse(8), slope(1), dPast(1), rowWeights(3 * 8);
  const HeadsView view{x.data(), 8 * 64, 8 * 64, 64};
  xtrap::cuda::BackwardArgs backward;
  backward.shape = {1, 1, 8, 64};
  backward.q = backward.k = backward.v = backward.o = backward.dO = backward.dq = backward.dk = backward.dv = view;
  backward.lse = lse.data(), backward.dSlopePast = dPast.data();
  backward.bias.slopePast = backward.bias.slopeFuture = slope.data();
  backward.scheme = xtrap::cuda::BackwardScheme::AtomicDq;
  Buffer<unsigned char> workspace(xtrap::cuda::linearBiasAttentionBackwardWorkspace(backward));
  CHECK(xtrap::cuda::linearBiasAttentionBackward(backward, workspace.data(), nullptr) == cudaErrorInvalidValue);
  backward.rowWeights = rowWeights.data();
  CHECK(xtrap::cuda::linearBiasAttentionBackward(backward, workspace.data(), nullptr) == cudaSuccess);
  backward.rowWeights = nullptr, backward.scheme = xtrap::cuda::BackwardScheme::TwoPass;
  CHECK(xtrap::cuda::linearBiasAttentionBackward(backward, workspace.data(), nullptr) == cudaSuccess);
  // Tile bounds not 16-byte aligned are refused, forward and backward.
  Buffer<float> bounds(xtrap::cuda::linearBiasAttentionTileBoundsFloats(backward.shape) + 1);
  xtrap::cuda::ForwardArgs forward;
  forward.shape = backward.shape, forward.q = forward.k = forward.v = forward.o = view, forward.lse = lse.data();
  forward.bias = backward.bias, forward.tileBounds = bounds.data() + 1;
  CHECK(xtrap::cuda::linearBiasAttentionForward(forward, nullptr) == cudaErrorInvalidValue);
  forward.tileBounds = bounds.data();
  CHECK(xtrap::cuda::linearBiasAttentionForward(forward, nullptr) == cudaSuccess);
  backward.tileBounds = bounds.data() + 1;
  CHECK(xtrap::cuda::linearBiasAttentionBackward(backward, workspace.data(), nullptr) == cudaErrorInvalidValue);
  backward.tileBounds = bounds.data();
  CHECK(xtrap::cuda::linearBiasAttentionBackward(backward, workspace.data(), nullptr) == cudaSuccess);
}
