// GPU test (ctest label gpu): the fused CUDA attention kernel of the ALiBi family (issue 23,
// linear_bias_attention.cuh through its LibTorch glue) against an fp32 reference that materialises
// the (H, T, T) bias straight from linear_bias_spec.h's formula, written out again here:
//   j < i: -slopePast[h] (i - j) or -inf if blockPast[h]; j > i: -slopeFuture[h] (j - i - shift)
//   or -inf if blockFuture[h] (or causal); j = i: 0; with a first-token bias every pair touching
//   position 0 gets firstTokenBias[h] instead.
// Checked, for every variant (causal ALiBi, symmetric, offset, one-sided, learned, BiALiBi, each
// fixed-slope one also with learned slopes, and interpolated slopes), H in {8, 12}, D in {64, 128},
// T in {1, 7, 128, 1000, 4099}: the output and dq, dk, dv, and the gradients of the learned slopes
// and first-token bias (through their sigmoid parameterisation, by autograd on both sides), with
// each backward scheme, with mma.sync's tile products and (--products) with the warpgroup MMA's
// (first its products alone, warpgroupProductsMatch)
// where the GPU has them (compute capability 9.0). Then:
// slope gradients bit-identical across two runs; negligible pairs skipped (the same results as
// computing them, and never read); dropout's mask the same in the backward pass as
// in the forward, kept at rate 1 - p, a function of torch::manual_seed; and at model level, the
// attention plan's choice of the kernel for the ALiBi family in bf16 on CUDA, with the model's
// features, loss and gradients within the bf16 tolerances of gpu_checks against fp32.
// Without the kernels (no CUDA LibTorch or no nvcc) or without a GPU it reports itself skipped.
// --sanitize: the kernel's own checks at a few small sizes, for compute-sanitizer (see main).
#include <torch/torch.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "../test_support.h"
#include "check_report.h"
#include "model/linear_bias_spec.h"
#include "model/position/linear_bias.h"
#include "model/transformer.h"
#include "util/execution_context.h"

#ifdef XTRAP_WITH_CUDA_KERNELS
#include <c10/cuda/CUDAFunctions.h>

#include "model/position/linear_bias_attention_cuda.h"
#endif

using namespace xtrap;
using checks::check;
using checks::fmtDouble;
using checks::relativeRms;

namespace {

#ifdef XTRAP_WITH_CUDA_KERNELS

const torch::Device kGpu(torch::kCUDA);

// Differences relative to the largest element, absolute below 1e-3.
double relativeMaxDiff(const torch::Tensor& reference, const torch::Tensor& got) {
  return checks::relativeMaxDiff(reference, got, 1e-3);
}

// The same for learned-parameter gradients, absolute below 1e-2: where the reference is zero
// (T = 1: one pair, (0, 0), whose dS = P (dP - D_0) = dO.v_0 - dO.o_0 is 0 exactly) the kernel's
// value is the rounding of two float32 dot products of D bf16 products each (dP by the tensor
// cores, D_0 by the lanes, in different orders): ~1e-5 per sequence, too close to 1e-2 x 1e-3.
// Gradients of T >= 7 are sums over many pairs, far above 1e-2.
double relativeParamDiff(const torch::Tensor& reference, const torch::Tensor& got) {
  return checks::relativeMaxDiff(reference, got, 1e-2);
}

// The formula above, differentiable in the slopes and the first-token bias: (H, T, T) float32.
torch::Tensor referenceBias(const LinearBiasSpec& spec, const torch::Tensor& slopePast,
                            const torch::Tensor& slopeFuture, const torch::Tensor& firstTokenBias, bool causal,
                            int64_t T) {
  const int64_t H = spec.heads();
  auto floats = torch::TensorOptions(torch::kFloat32).device(kGpu);
  auto i = torch::arange(T, floats).view({1, T, 1}), j = torch::arange(T, floats).view({1, 1, T});
  auto pastDistance = torch::where(j < i, i - j, torch::zeros_like(i - j));                       // (1, T, T)
  auto futureDistance = torch::where(j > i, j - i - spec.futureShift, torch::zeros_like(i - j));  // (1, T, T)
  auto bias = -(slopePast.view({H, 1, 1}) * pastDistance + slopeFuture.view({H, 1, 1}) * futureDistance);
  std::vector<uint8_t> past(spec.blockPast.begin(), spec.blockPast.end()),
      future(spec.blockFuture.begin(), spec.blockFuture.end());
  auto blockPast = torch::tensor(past).to(kGpu).to(torch::kBool).view({H, 1, 1});
  auto blockFuture = torch::tensor(future).to(kGpu).to(torch::kBool).view({H, 1, 1});
  auto blocked = (blockPast & (j < i)) | (blockFuture & (j > i));  // (H, T, T)
  if (causal) blocked = blocked | (j > i);
  if (spec.hasFirstTokenBias) {
    auto touching = (i == 0) | (j == 0);  // (1, T, T)
    bias = torch::where(touching, firstTokenBias.view({H, 1, 1}).expand_as(bias), bias);
    blocked = blocked & ~touching;
  }
  return bias.masked_fill(blocked, -std::numeric_limits<float>::infinity());
}

// One variant: a LinearBias on the GPU (its slopes in use come from it on both sides).
struct Variant {
  std::string name;
  LinearBiasSpec spec;
  bool causal = false;
  std::vector<double> divisors;  // interpolation: per-head slope divisors, or none
};

std::vector<Variant> variants(int64_t H) {
  std::vector<Variant> out;
  auto add = [&](const std::string& name, PositionMethod method, bool causal) {
    out.push_back({name, makeLinearBiasSpec(method, H, causal), causal, {}});
  };
  add("causal alibi", PositionMethod::Alibi, true);
  add("symmetric alibi", PositionMethod::Alibi, false);
  add("alibi-offset", PositionMethod::AlibiOffset, false);
  add("alibi-onesided", PositionMethod::AlibiOneSided, false);
  add("alibi-learned", PositionMethod::AlibiLearned, false);
  add("bialibi", PositionMethod::BiAlibi, false);
  // The fixed-slope variants with learned slopes: their slope gradients through blocking and shift.
  for (size_t v = 0; v < 4; ++v) {
    Variant learned = out[v];
    learned.name += " (slopes learned)";
    learned.spec.learnedSlopes = true;
    // A blocked direction's slope is unused; 0 (one-sided) would make its logit -inf.
    for (auto* slopes : {&learned.spec.slopePast, &learned.spec.slopeFuture})
      for (double& s : *slopes)
        if (s <= 0) s = 0.5;
    out.push_back(learned);
  }
  // Interpolation is other slopes: NTK-style per-head divisors a^((h-1)/(H-1)), a = 8.
  Variant ntk{"causal alibi, per-head divisors", makeLinearBiasSpec(PositionMethod::Alibi, H, true), true, {}};
  for (int64_t h = 0; h < H; ++h) ntk.divisors.push_back(std::pow(8.0, double(h) / double(H - 1)));
  out.push_back(ntk);
  return out;
}

struct Grads {
  torch::Tensor o, dq, dk, dv;
  std::vector<torch::Tensor> params;  // the LinearBias's parameter gradients, in named_parameters() order
};

std::vector<torch::Tensor> takeParamGrads(LinearBias& bias) {
  std::vector<torch::Tensor> grads;
  for (auto& p : bias.parameters()) {
    grads.push_back(p.grad().defined() ? p.grad().clone() : torch::zeros_like(p));
    p.mutable_grad() = torch::Tensor();
  }
  return grads;
}

// How the kernel runs, each way checked alike: its backward scheme (cuda::BackwardScheme) and its
// tile products (cuda::TileProducts): mma.sync and the warpgroup MMA (compute capability 9.0 only),
// each with both schemes. --products picks which (main).
struct KernelConfig {
  cuda::BackwardScheme scheme;
  cuda::TileProducts products;
  const char* name;
};
using Configs = std::vector<KernelConfig>;
const Configs kWarpConfigs = {{cuda::BackwardScheme::TwoPass, cuda::TileProducts::WarpMma, "two-pass backward"},
                              {cuda::BackwardScheme::AtomicDq, cuda::TileProducts::WarpMma, "atomic dQ backward"}};
const Configs kWarpgroupConfigs = {
    {cuda::BackwardScheme::TwoPass, cuda::TileProducts::WarpgroupMma, "warpgroup MMA products, two-pass backward"},
    {cuda::BackwardScheme::AtomicDq, cuda::TileProducts::WarpgroupMma, "warpgroup MMA products, atomic dQ backward"}};

// The kernel: o and every gradient of sum(o * dO), for bf16 q, k, v.
// skipNegligible, products: as fusedLinearBiasAttention's (false: every open pair computed).
Grads kernelPass(LinearBias& bias, bool causal, const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                 const torch::Tensor& dO, double scale, double dropout = 0.0,
                 cuda::BackwardScheme scheme = cuda::BackwardScheme::TwoPass, bool skipNegligible = true,
                 cuda::TileProducts products = cuda::TileProducts::WarpMma) {
  auto ql = q.detach().requires_grad_(), kl = k.detach().requires_grad_(), vl = v.detach().requires_grad_();
  auto o = fusedLinearBiasAttention(ql, kl, vl, bias, causal, scale, dropout, scheme, skipNegligible,
                                    products);  // (B, H, T, D) bf16
  o.backward(dO);
  return {o.detach(), ql.grad(), kl.grad(), vl.grad(), takeParamGrads(bias)};
}

// The fp32 reference with the materialised bias; `keep` (B, H, T, T) is a dropout mask or undefined.
Grads referencePass(LinearBias& bias, bool causal, const torch::Tensor& q, const torch::Tensor& k,
                    const torch::Tensor& v, const torch::Tensor& dO, double scale, const torch::Tensor& keep = {},
                    double dropout = 0.0) {
  auto ql = q.detach().to(torch::kFloat32).requires_grad_(), kl = k.detach().to(torch::kFloat32).requires_grad_(),
       vl = v.detach().to(torch::kFloat32).requires_grad_();
  auto b = referenceBias(bias.spec(), bias.slopePast(), bias.slopeFuture(), bias.firstTokenBias(), causal, q.size(2));
  auto logits = torch::matmul(ql, kl.transpose(-2, -1)) * scale + b;  // (B, H, T, T)
  auto probs = torch::softmax(logits, -1);
  if (keep.defined()) probs = probs * keep.to(torch::kFloat32) / (1.0 - dropout);
  auto o = torch::matmul(probs, vl);  // (B, H, T, D)
  o.backward(dO.to(torch::kFloat32));
  return {o.detach(), ql.grad(), kl.grad(), vl.grad(), takeParamGrads(bias)};
}

std::shared_ptr<LinearBias> makeBias(const Variant& variant) {
  auto bias = std::make_shared<LinearBias>(variant.spec, false);
  bias->to(kGpu);
  if (!variant.divisors.empty()) bias->setSlopeDivisors(variant.divisors, variant.divisors);
  if (variant.spec.hasFirstTokenBias) {
    torch::NoGradGuard g;  // the parameter starts at 0: give every head its own value
    bias->firstTokenBias().copy_(torch::linspace(-1.5, 1.0, variant.spec.heads()));
  }
  return bias;
}

// Stated tolerances. bf16 keeps 8 significant bits (2^-9 relative per rounding): the kernel rounds
// the probabilities (and dS) to bf16 for its matmuls and its outputs once; errors stay near 1e-2 of
// the largest element. Learned-parameter gradients are sums over T^2 cells of dS times a distance
// with cancelling signs (each row of dS sums to zero): 1e-2 of the largest head's gradient.
constexpr double kTensorTolerance = 2e-2, kParamTolerance = 1e-2;

// The sizes the checks run at: every size issue 23 names, or (--sanitize) a few small ones that
// still take every path of the kernels (several tiles and a tail tile, both head dimensions).
struct Sizes {
  std::vector<int64_t> heads, headDims, lengths;
  int64_t negligibleB, negligibleT;  // negligiblePairsSkipped's batch and length
};
const Sizes kIssueSizes{{8, 12}, {64, 128}, {1, 7, 128, 1000, 4099}, 2, 4099};
const Sizes kSanitizerSizes{{8}, {64, 128}, {130}, 1, 600};

// The warpgroup MMA's products alone (probeWarpgroupProducts), checked first: should the kernels'
// results with them be wrong, this says which operand layout is. Each against the float64 product
// of the same bf16 tiles (entries uniform in [-1, 1]), within 1e-3: an fp32 sum of K 64 or 128
// exact products rounds by about 1e-5, a wrong layout is off by about 1.
void warpgroupProductsMatch() {
  torch::manual_seed(7);
  auto f64 = [](const torch::Tensor& t) { return t.to(torch::kFloat64); };
  for (int64_t D : {64, 128}) {
    auto draw = [](int64_t columns) {
      return (torch::rand({64, columns}, torch::kFloat64) * 2 - 1).to(kGpu, torch::kBFloat16);
    };
    const torch::Tensor q = draw(D), k = draw(D), v = draw(D), p = draw(64);
    const std::vector<torch::Tensor> got = probeWarpgroupProducts(q, k, v, p);
    const torch::Tensor qk = f64(q).matmul(f64(k).t());
    const torch::Tensor want[4] = {qk, qk, f64(p).matmul(f64(v)), f64(p).t().matmul(f64(k))};
    const char* what[4] = {"s = q k^T (A and B K-major in shared memory)", "q k^T by the product that overwrites",
                           "o = p v (A in registers, B MN-major)",
                           "dq = p^T k (AtomicDq's: A stored from registers, A and B MN-major)"};
    for (int i = 0; i < 4; ++i) {
      const double diff = (f64(got[size_t(i)]) - want[i]).abs().max().item<double>();
      check(diff < 1e-3, "warpgroup products probe, D " + std::to_string(D) + ", " + what[i] + ": max |diff| " +
                             fmtDouble(diff) + " (tolerance 1e-3)");
    }
  }
}

void kernelMatchesReference(const Sizes& sizes, const Configs& configs) {
  for (int64_t H : sizes.heads)
    for (int64_t D : sizes.headDims)
      for (const Variant& variant : variants(H))
        for (int64_t T : sizes.lengths) {
          const int64_t B = T > 1000 ? 1 : 2;
          auto bias = makeBias(variant);
          torch::manual_seed(T * 131 + H * 7 + D);
          auto bf16 = torch::TensorOptions(torch::kBFloat16).device(kGpu);
          auto q = torch::randn({B, H, T, D}, bf16), k = torch::randn({B, H, T, D}, bf16),
               v = torch::randn({B, H, T, D}, bf16), dO = torch::randn({B, H, T, D}, bf16);
          const double scale = 1.0 / std::sqrt(double(D));
          Grads ref = referencePass(*bias, variant.causal, q, k, v, dO, scale);
          for (const KernelConfig& config : configs) {
            Grads got =
                kernelPass(*bias, variant.causal, q, k, v, dO, scale, 0.0, config.scheme, true, config.products);
            double worst = 0;
            std::string detail;
            for (auto [label, r, g] : {std::tuple{"o", ref.o, got.o}, std::tuple{"dq", ref.dq, got.dq},
                                       std::tuple{"dk", ref.dk, got.dk}, std::tuple{"dv", ref.dv, got.dv}}) {
              double e = relativeMaxDiff(r, g);
              worst = std::max(worst, e);
              detail += std::string(" ") + label + " " + fmtDouble(e);
            }
            double worstParam = 0;
            bool finite = got.o.isfinite().all().item<bool>();
            for (size_t p = 0; p < ref.params.size(); ++p) {
              finite = finite && got.params[p].isfinite().all().item<bool>();
              worstParam = std::max(worstParam, relativeParamDiff(ref.params[p], got.params[p]));
            }
            check(finite && worst <= kTensorTolerance && worstParam <= kParamTolerance,
                  std::string(config.name) + ", " + variant.name + " H=" + std::to_string(H) +
                      " D=" + std::to_string(D) + " T=" + std::to_string(T) + ":" + detail + ", learned parameters " +
                      fmtDouble(worstParam) + " (" + std::to_string(ref.params.size()) + " tensors; tolerances " +
                      fmtDouble(kTensorTolerance) + ", " + fmtDouble(kParamTolerance) + " of the largest element)");
          }
        }
}

// The slope and first-token-bias gradients are reduced in a fixed order: bit-identical run to run,
// whichever the backward scheme (the atomic one's dq is not).
void slopeGradientsDeterministic(const Configs& configs) {
  for (const KernelConfig& config : configs)
    for (const char* name : {"bialibi", "causal alibi (slopes learned)"}) {
      for (const Variant& variant : variants(12)) {
        if (variant.name != name) continue;
        auto bias = makeBias(variant);
        torch::manual_seed(5);
        auto bf16 = torch::TensorOptions(torch::kBFloat16).device(kGpu);
        auto q = torch::randn({4, 12, 2000, 64}, bf16), k = torch::randn_like(q), v = torch::randn_like(q),
             dO = torch::randn_like(q);
        Grads a = kernelPass(*bias, variant.causal, q, k, v, dO, 0.125, 0.0, config.scheme, true, config.products);
        Grads b = kernelPass(*bias, variant.causal, q, k, v, dO, 0.125, 0.0, config.scheme, true, config.products);
        bool same = !a.params.empty() && a.params.size() == b.params.size();
        for (size_t p = 0; same && p < a.params.size(); ++p) same = torch::equal(a.params[p], b.params[p]);
        bool sameQkv = torch::equal(a.dq, b.dq) && torch::equal(a.dk, b.dk) && torch::equal(a.dv, b.dv);
        check(same, std::string(config.name) + ", " + variant.name +
                        " B=4 H=12 T=2000 D=64: learned-parameter gradients bit-identical across two runs (" +
                        std::to_string(a.params.size()) + " tensors; dq, dk, dv " +
                        (sameQkv ? "bit-identical too" : "not bit-identical, not required") + ")");
      }
    }
}

// Negligible pairs (every probability below 2^-136) skipped against every open pair computed, causal
// ALiBi with learned slopes at H 8, batch B, length T > 512 (head 0's slope 0.5 leaves pairs some 250
// tokens apart out): the same o, dq, dk, dv and slope gradients within 2^-20 of their largest element
// (the backward's skipped cells are exactly 0 either way; the forward's differ by less than 2^-136),
// and said whether bit for bit. Then v of keys 0-63 NaN: head 0's rows from 512 on, whose pairs with
// those keys are skipped, stay finite; computing every pair, they are NaN (0 x NaN).
void negligiblePairsSkipped(int64_t B, int64_t T, const Configs& configs) {
  const std::string shape = " B=" + std::to_string(B) + " H=8 T=" + std::to_string(T) + " D=64";
  for (const Variant& variant : variants(8)) {
    if (variant.name != "causal alibi (slopes learned)") continue;
    for (const KernelConfig& config : configs) {
      const cuda::BackwardScheme scheme = config.scheme;
      auto bias = makeBias(variant);
      torch::manual_seed(17);
      auto bf16 = torch::TensorOptions(torch::kBFloat16).device(kGpu);
      auto q = torch::randn({B, 8, T, 64}, bf16), k = torch::randn_like(q), v = torch::randn_like(q),
           dO = torch::randn_like(q);
      auto pass = [&](const torch::Tensor& values, bool skipNegligible) {
        return kernelPass(*bias, true, q, k, values, dO, 0.125, 0.0, scheme, skipNegligible, config.products);
      };
      Grads skip = pass(v, true);
      Grads dense = pass(v, false);
      double worst = 0;
      bool exact = true;
      std::vector<std::pair<torch::Tensor, torch::Tensor>> pairs = {
          {dense.o, skip.o}, {dense.dk, skip.dk}, {dense.dv, skip.dv}};
      if (scheme == cuda::BackwardScheme::TwoPass) pairs.push_back({dense.dq, skip.dq});  // AtomicDq's dq varies
      for (size_t p = 0; p < dense.params.size(); ++p) pairs.push_back({dense.params[p], skip.params[p]});
      for (const auto& [want, got] : pairs) {
        worst = std::max(worst, checks::relativeMaxDiff(want, got));
        exact = exact && torch::equal(want, got);
      }
      check(worst <= std::ldexp(1.0, -20),
            std::string(config.name) + ", causal alibi (slopes learned)" + shape + ": negligible " +
                "pairs skipped against computed, o, dk, dv" + (scheme == cuda::BackwardScheme::TwoPass ? ", dq" : "") +
                " and slope gradients differ by " + fmtDouble(worst) + " of the largest element (<= 2^-20; " +
                (exact ? "bit-identical" : "not bit-identical") + ")");

      auto poisoned = v.clone();
      poisoned.index_put_({torch::indexing::Slice(), torch::indexing::Slice(), torch::indexing::Slice(0, 64)},
                          std::numeric_limits<float>::quiet_NaN());
      auto far = [](const Grads& g) {
        return g.o.index({torch::indexing::Slice(), 0, torch::indexing::Slice(512)}).isfinite().all().item<bool>();
      };
      const bool skipFinite = far(pass(poisoned, true));
      const bool denseFinite = far(pass(poisoned, false));
      check(skipFinite && !denseFinite,
            std::string(config.name) + "," + shape + ": with v of keys 0-63 NaN, head 0's rows 512-" +
                std::to_string(T - 1) + " are " + (skipFinite ? "finite" : "not finite") +
                " when negligible pairs are skipped (want finite) and " + (denseFinite ? "finite" : "not finite") +
                " when every pair is computed (want not)");
    }
  }
}

// T = 0 (empty tensors, which may have no storage): empty outputs and zero learned-parameter
// gradients, not an error.
void emptySequence() {
  for (const Variant& variant : variants(8)) {
    if (variant.name != "bialibi") continue;
    auto bias = makeBias(variant);
    auto q = torch::randn({2, 8, 0, 64}, torch::TensorOptions(torch::kBFloat16).device(kGpu));  // (B, H, 0, D)
    Grads got = kernelPass(*bias, variant.causal, q, q, q, q, 0.125);
    bool zero = !got.params.empty();
    for (const auto& g : got.params) zero = zero && g.numel() == 8 && g.eq(0).all().item<bool>();
    check(got.o.sizes() == q.sizes() && got.dq.sizes() == q.sizes() && zero,
          "bialibi T=0: empty output and input gradients, zero learned-parameter gradients");
  }
}

// The worst relative difference from ref of o, dq, dk and dv, and of the learned-parameter gradients.
struct Errors {
  double tensors = 0, params = 0;
};
Errors errorsAgainst(const Grads& ref, const Grads& got) {
  Errors e;
  e.tensors = std::max({relativeMaxDiff(ref.o, got.o), relativeMaxDiff(ref.dq, got.dq), relativeMaxDiff(ref.dk, got.dk),
                        relativeMaxDiff(ref.dv, got.dv)});
  for (size_t i = 0; i < ref.params.size(); ++i)
    e.params = std::max(e.params, relativeParamDiff(ref.params[i], got.params[i]));
  return e;
}

// Dropout: with v the identity (T <= D), o[i, j] = P_ij keep_ij / (1 - p), which shows the mask the
// forward drew; the backward must use the same one. The reference takes that mask as a constant:
// the mask of the first configuration's pass, which the others draw again from the same seed.
void dropoutMaskConsistent(const Configs& configs) {
  const int64_t B = 2, H = 8, T = 50, D = 64;
  const double p = 0.3, scale = 0.125;
  const KernelConfig& first = configs.front();
  for (const char* name : {"bialibi", "causal alibi"}) {
    for (const Variant& variant : variants(H)) {
      if (variant.name != name) continue;
      auto bias = makeBias(variant);
      auto bf16 = torch::TensorOptions(torch::kBFloat16).device(kGpu);
      torch::manual_seed(11);
      auto q = torch::randn({B, H, T, D}, bf16), k = torch::randn_like(q), dO = torch::randn_like(q);
      auto v = torch::eye(T, D, bf16.dtype(torch::kFloat32))
                   .to(torch::kBFloat16)
                   .expand({B, H, T, D})
                   .contiguous();  // (B, H, T, D): v_j = e_j
      auto pass = [&](const KernelConfig& config, int64_t seed) {
        torch::manual_seed(seed);
        return kernelPass(*bias, variant.causal, q, k, v, dO, scale, p, config.scheme, true, config.products);
      };
      Grads got = pass(first, 42);
      // Cells a causal mask blocks have P = 0 whether kept or not: count the visible ones only.
      auto visible = torch::ones({T, T}, torch::TensorOptions(torch::kFloat32).device(kGpu));  // (T, T)
      if (variant.causal) visible = visible.tril();
      visible = visible > 0;
      auto keep = got.o.narrow(-1, 0, T) > 0;  // (B, H, T, T)
      double kept = (keep & visible).sum().item<double>() / (visible.sum().item<double>() * B * H);
      // 40,000 cells (bidirectional; 20,400 causal): 3 standard deviations of the rate are < 0.01.
      check(std::abs(kept - (1 - p)) <= 0.015, variant.name + " dropout 0.3, " + first.name + ": kept fraction " +
                                                   fmtDouble(kept) + " (expected 0.7 +- 0.015)");
      Grads ref = referencePass(*bias, variant.causal, q, k, v, dO, scale, keep, p);
      // The same seed, so the same mask: every configuration against the same reference (the atomic
      // backward's forward may sum the row weights too: the same mask still).
      for (const KernelConfig& config : configs) {
        const Errors e = errorsAgainst(ref, &config == &first ? got : pass(config, 42));
        check(e.tensors <= kTensorTolerance && e.params <= kParamTolerance,
              variant.name + " dropout 0.3, " + config.name + ": output and gradients against the reference with " +
                  "the first pass's mask: " + fmtDouble(e.tensors) + ", learned parameters " + fmtDouble(e.params) +
                  " (the backward regenerates the forward's mask)");
      }
      Grads again = pass(first, 42), other = pass(first, 43);
      check(torch::equal(again.o, got.o) && !torch::equal(other.o, got.o),
            variant.name + " dropout 0.3, " + first.name +
                ": the same torch::manual_seed draws the same mask, another seed another");
    }
  }
}

ModelConfig modelConfig(const std::string& pos, const std::string& arch) {
  auto c = test::tinyConfig(pos, arch, 2);
  c.dModel = 128;  // 2 heads of 64
  c.ffn = 256;
  c.contextLength = 256;
  c.maxPositions = 1024;
  return c;
}

struct ModelPass {
  torch::Tensor features, nll;  // float64 on the host
  std::vector<torch::Tensor> grads;
};

ModelPass modelPass(Transformer& model, const torch::Tensor& tokens, const torch::Tensor& targets,
                    const ForwardOptions& opt) {
  for (auto& p : model->parameters()) p.mutable_grad() = torch::Tensor();
  auto f = model->features(tokens, opt);  // (B, T, C)
  auto nll = model->tokenNll(f.reshape({-1, f.size(-1)}), targets).mean();
  nll.backward();
  ModelPass pass{f.detach().cpu().to(torch::kFloat64), nll.detach().cpu().to(torch::kFloat64), {}};
  for (auto& p : model->parameters())
    pass.grads.push_back(p.grad().defined() ? p.grad().cpu().to(torch::kFloat64) : torch::Tensor());
  return pass;
}

// The plan sends the ALiBi family in bf16 on CUDA through the kernel (not probes, not fp32, not the
// other methods); the model then trains like fp32 within gpu_checks' bf16 tolerances.
void modelUsesKernel() {
  const int64_t T = 300;
  for (test::Method m : {test::Method{"alibi", "decoder"}, test::Method{"alibi-learned", "encoder"},
                         test::Method{"bialibi", "encoder"}, test::Method{"alibi-onesided", "encoder"}}) {
    std::string name = m.arch + " " + m.pos;
    Transformer fp32(modelConfig(m.pos, m.arch));
    if (auto* lb = fp32->linearBias(); lb && lb->firstTokenBias().defined()) {
      torch::NoGradGuard g;
      lb->firstTokenBias().copy_(torch::linspace(-1, 1, 2));
    }
    fp32->place({kGpu, torch::kFloat32});
    fp32->eval();
    Transformer bf16 = test::copyOnto(fp32, {kGpu, torch::kBFloat16});
    ForwardOptions blocked, probed;
    blocked.queryBlock = 256;
    struct NullObserver : AttentionObserver {
      void onProbabilities(int64_t, int64_t, const torch::Tensor&) override {}
    } observer;
    probed.observer = &observer;
    check(bf16->attentionPath(T, {}) == AttentionPath::FusedLinearBias &&
              bf16->attentionPath(T, blocked) == AttentionPath::FusedLinearBias,
          name + ": bf16 on CUDA plans " + attentionPathName(bf16->attentionPath(T, {})) +
              " (with and without a query block)");
    check(fp32->attentionPath(T, {}) != AttentionPath::FusedLinearBias,
          name + ": fp32 on CUDA plans " + attentionPathName(fp32->attentionPath(T, {})) + " (the kernel is bf16)");
    check(
        bf16->attentionPath(T, probed) != AttentionPath::FusedLinearBias,
        name + ": probes plan " + attentionPathName(bf16->attentionPath(T, probed)) + " (they read the probabilities)");
    torch::manual_seed(3);
    auto tokens = torch::randint(0, fp32->config.vocabSize, {2, T}, torch::kLong);
    auto targets = torch::randint(0, fp32->config.vocabSize, {2 * T}, torch::kLong);
    ForwardOptions reference;
    reference.path = AttentionPath::Reference;
    ModelPass expected = modelPass(fp32, tokens, targets, reference);
    ModelPass got = modelPass(bf16, tokens, targets, {});
    double worstGrad = 0;
    bool all = expected.grads.size() == got.grads.size();
    for (size_t i = 0; all && i < expected.grads.size(); ++i) {
      if (expected.grads[i].defined() != got.grads[i].defined()) all = false;
      if (expected.grads[i].defined() && all)
        worstGrad = std::max(worstGrad, relativeRms(expected.grads[i], got.grads[i]));
    }
    double featRms = relativeRms(expected.features, got.features);
    double nllRel = std::abs(got.nll.item<double>() - expected.nll.item<double>()) / expected.nll.item<double>();
    check(all && featRms <= 0.05 && nllRel <= 0.01 && worstGrad <= 0.10,
          name + ": bf16 through the kernel vs fp32 reference, T=300: features RMS " + fmtDouble(featRms) +
              " (<= 0.05), NLL " + fmtDouble(nllRel) + " (<= 0.01), worst gradient RMS " + fmtDouble(worstGrad) +
              " (<= 0.10; every parameter, learned slopes included)");
  }
}

#endif  // XTRAP_WITH_CUDA_KERNELS

}  // namespace

// fused_attention_checks [--sanitize] [--products warp|warpgroup|all]. --sanitize: under
// compute-sanitizer (bench/gpu_check.sh's sanitize stage), whose instrumented kernels run some
// 10-100x slower, the checks of the kernel itself at kSanitizerSizes; not the run-to-run
// determinism (two runs of a large case) nor the model-level check (LibTorch's kernels around the
// fused ones).
int main(int argc, char** argv) {
  // --products: warp (default: mma.sync, both backward schemes, and the model's use), warpgroup
  // (the warpgroup MMA's, a test of its own, so that a fault there cannot hide the others' results)
  // or all.
  bool sanitize = false;
  std::string products = "warp";
  const char* usage = "usage: fused_attention_checks [--sanitize] [--products warp|warpgroup|all]";
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i], value = i + 1 < argc ? argv[i + 1] : "";
    if (arg == "--sanitize") {
      sanitize = true;
    } else if (arg == "--products" && (value == "warp" || value == "warpgroup" || value == "all")) {
      products = value;
      ++i;
    } else {
      std::fprintf(stderr, "fused_attention_checks: bad argument '%s'%s (%s)\n", arg.c_str(),
                   arg == "--products" ? (" '" + value + "'").c_str() : "", usage);
      return 2;
    }
  }
  if (const int status = checks::skipStatus(/*needsKernels=*/true)) return status;
#ifdef XTRAP_WITH_CUDA_KERNELS
  Configs configs;
  if (products != "warpgroup") configs = kWarpConfigs;
  bool warpgroup = false;  // its products checked
  if (products != "warp") {
    if (const char* reason =
            cuda::linearBiasAttentionProductsCheck(c10::cuda::current_device(), cuda::TileProducts::WarpgroupMma)) {
      if (products == "warpgroup") {
        std::printf("skipped: %s\n", reason);
        return 77;
      }
      std::printf("note: the warpgroup MMA's products not checked: %s\n", reason);
    } else {
      configs.insert(configs.end(), kWarpgroupConfigs.begin(), kWarpgroupConfigs.end());
      warpgroup = true;
    }
  }
  const Sizes& sizes = sanitize ? kSanitizerSizes : kIssueSizes;
  const std::string name = std::string("fused_attention_checks") + (sanitize ? " --sanitize" : "") +
                           (products == "warp" ? "" : " --products " + products);
  return checks::runChecks(name, [&] {
    if (warpgroup) warpgroupProductsMatch();
    kernelMatchesReference(sizes, configs);
    if (!sanitize) slopeGradientsDeterministic(configs);
    negligiblePairsSkipped(sizes.negligibleB, sizes.negligibleT, configs);
    emptySequence();
    dropoutMaskConsistent(configs);
    if (!sanitize && products != "warpgroup") modelUsesKernel();
  });
#endif
}
