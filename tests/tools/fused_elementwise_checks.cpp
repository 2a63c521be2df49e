// GPU test (ctest label gpu): the fused elementwise CUDA kernels (issue 62: add_norm.cu,
// activation_dropout.cu, embedding_dropout.cu through their LibTorch glue) against LibTorch's
// composite operators on the same GPU, forward and every gradient:
//   add & norm:          out = x + y, normed = layer_norm(out) * w + b, y and normed bf16 or float32,
//                        C 512 (16-byte chunks) and 37 (one element at a time);
//   activation:          GELU, GELU (tanh) and ReLU of bf16 and float32;
//   embedding:           x * scale + positions, learned positions getting their gradient.
// Dropout: each kernel's mask is the CPU's fastDropout mask (dropBlock) for the key of the CUDA
// generator's (seed, offset) at the call, kept at rate 1 - p, and the backward's mask is the
// forward's; inside a captured CUDA graph every replay draws a new mask. Model: features, loss
// and every gradient with the fused kernels equal the model's with LibTorch's operators
// (TransformerImpl::setFusedElementwise(false)), dropout 0, in float32 and in bf16 autocast.
// Without the kernels (no CUDA LibTorch or no nvcc) or without a GPU it reports itself skipped.
#include <torch/torch.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "../test_support.h"
#include "check_report.h"
#include "model/transformer.h"
#include "model_pass.h"
#include "util/execution_context.h"

#ifdef XTRAP_WITH_CUDA_KERNELS
#include <ATen/cuda/CUDAGeneratorImpl.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "model/activation_dropout_cuda.h"
#include "model/add_norm_cuda.h"
#include "model/counter_dropout.h"
#include "model/embedding_dropout_cuda.h"
#include "model/fast_dropout.h"
#endif

using namespace xtrap;
using checks::check;
using checks::fmtDouble;
using checks::Pass;
using checks::relativeMaxDiff;
using checks::runPass;

namespace {

#ifdef XTRAP_WITH_CUDA_KERNELS

const torch::Device kGpu(torch::kCUDA);

std::string dtypeName(torch::ScalarType t) { return t == torch::kBFloat16 ? "bf16" : "float32"; }

// Relative max difference allowed: float32 kernels against float32 operators (different
// summation orders), or one bf16 rounding.
double tolerance(torch::ScalarType t) { return t == torch::kBFloat16 ? 1e-2 : 1e-5; }

// The gradients of `inputs` for the loss sum(outputs[i] * weights[i]).
std::vector<torch::Tensor> gradients(const std::vector<torch::Tensor>& outputs,
                                     const std::vector<torch::Tensor>& weights,
                                     const std::vector<torch::Tensor>& inputs) {
  auto loss = torch::zeros({}, torch::TensorOptions(kGpu));
  for (size_t i = 0; i < outputs.size(); ++i) loss = loss + (outputs[i].to(torch::kFloat32) * weights[i]).sum();
  return torch::autograd::grad({loss}, inputs);
}

void addNormMatchesOperators() {
  for (int64_t C : {512, 37})
    for (auto yDtype : {torch::kBFloat16, torch::kFloat32})
      for (auto normedDtype : {torch::kBFloat16, torch::kFloat32}) {
        torch::manual_seed(C);
        const std::string name =
            "add & norm, C " + std::to_string(C) + ", y " + dtypeName(yDtype) + ", normed " + dtypeName(normedDtype);
        auto f32 = torch::TensorOptions(kGpu).dtype(torch::kFloat32);
        auto x = (torch::randn({3, 70, C}, f32) * 2 + 0.5).requires_grad_();
        auto y = torch::randn({3, 70, C}, f32).to(yDtype).requires_grad_();
        auto w = (1 + 0.3 * torch::randn({C}, f32)).requires_grad_();
        auto b = torch::randn({C}, f32).requires_grad_();
        auto gOut = torch::randn({3, 70, C}, f32), gNormed = torch::randn({3, 70, C}, f32);
        AddNormed fused = fusedAddNorm(x, y, w, b, 1e-5, 0.0, normedDtype);
        auto out = x + y.to(torch::kFloat32);
        auto normed = torch::layer_norm(out, {C}, w, b, 1e-5).to(normedDtype);
        const double outDiff = relativeMaxDiff(out, fused.out), normedDiff = relativeMaxDiff(normed, fused.normed);
        check(fused.normed.scalar_type() == normedDtype && outDiff <= 1e-6 && normedDiff <= tolerance(normedDtype),
              name + ": out " + fmtDouble(outDiff) + ", normed " + fmtDouble(normedDiff));
        auto want = gradients({out, normed}, {gOut, gNormed}, {x, y, w, b});
        auto got = gradients({fused.out, fused.normed}, {gOut, gNormed}, {x, y, w, b});
        const char* names[] = {"dx", "dy", "dw", "db"};
        for (size_t i = 0; i < 4; ++i) {
          const double diff = relativeMaxDiff(want[i], got[i]);
          const double tol = std::max(tolerance(normedDtype), i == 1 ? tolerance(yDtype) : 0.0) * (i >= 2 ? 10 : 1);
          check(got[i].scalar_type() == want[i].scalar_type() && diff <= tol,
                name + ": " + names[i] + " " + fmtDouble(diff) + " (tolerance " + fmtDouble(tol) + ")");
        }
      }
}

void activationMatchesOperators() {
  const std::pair<Activation, const char*> kinds[] = {
      {Activation::Gelu, "GELU"}, {Activation::GeluTanh, "GELU (tanh)"}, {Activation::Relu, "ReLU"}};
  for (const auto& [kind, kindName] : kinds)
    for (auto dtype : {torch::kBFloat16, torch::kFloat32}) {
      torch::manual_seed(7);
      auto h = (2 * torch::randn({4, 33, 2048}, torch::TensorOptions(kGpu))).to(dtype).requires_grad_();
      auto g = torch::randn({4, 33, 2048}, torch::TensorOptions(kGpu));
      auto fused = fusedActivationDropout(h, kind, 0.0);
      auto want = kind == Activation::Relu       ? torch::relu(h)
                  : kind == Activation::GeluTanh ? torch::gelu(h, "tanh")
                                                 : torch::gelu(h);
      const double diff = relativeMaxDiff(want, fused);
      const double gradDiff = relativeMaxDiff(gradients({want}, {g}, {h})[0], gradients({fused}, {g}, {h})[0]);
      check(fused.scalar_type() == dtype && diff <= tolerance(dtype) && gradDiff <= tolerance(dtype),
            std::string(kindName) + " " + dtypeName(dtype) + ": forward " + fmtDouble(diff) + ", backward " +
                fmtDouble(gradDiff));
    }
}

void embeddingMatchesOperators() {
  for (bool learned : {true, false}) {
    torch::manual_seed(11);
    auto f32 = torch::TensorOptions(kGpu);
    auto x = torch::randn({4, 100, 64}, f32).requires_grad_();
    auto positions = torch::randn({100, 64}, f32).requires_grad_(learned);
    auto g = torch::randn({4, 100, 64}, f32);
    auto fused = fusedEmbeddingDropout(x, 8.0, positions, 0.0);
    auto want = x * 8.0 + positions;
    std::vector<torch::Tensor> inputs{x};
    if (learned) inputs.push_back(positions);
    auto gotGrads = gradients({fused}, {g}, inputs), wantGrads = gradients({want}, {g}, inputs);
    double gradDiff = 0;
    for (size_t i = 0; i < inputs.size(); ++i)
      gradDiff = std::max(gradDiff, relativeMaxDiff(wantGrads[i], gotGrads[i]));
    const double diff = relativeMaxDiff(want, fused);
    check(diff <= 1e-6 && gradDiff <= 1e-5, std::string("embedding scale + ") + (learned ? "learned" : "fixed") +
                                                " positions: forward " + fmtDouble(diff) + ", gradients " +
                                                fmtDouble(gradDiff));
  }
}

// The key of the next call's dropout: the generator's seed and offset now (the call reserves from
// this offset on).
uint64_t nextKey() {
  auto gen = at::cuda::detail::getDefaultCUDAGenerator();
  auto* impl = gen.get<at::CUDAGeneratorImpl>();
  return dropoutKey(impl->current_seed(), impl->philox_offset_per_thread());
}

// fastDropout's CPU mask of n elements for `key` (dropBlock of the whole tensor), as 0/1 float32.
torch::Tensor cpuMask(int64_t n, double p, uint64_t key) {
  return dropBlock(torch::ones({1, n}), p, key, {0, 1, n}).mask.to(torch::kFloat32).view({-1});
}

// Each kernel on ones, so that its output is the mask times 1 / (1 - p), and its backward from
// ones the same: the CPU's mask for the call's key, at rate 1 - p, the same in the backward.
void dropoutMasksMatchCpu() {
  const double p = 0.3;
  const int64_t B = 4, T = 50, C = 40, n = B * T * C;
  const float scale = float(1.0 / (1.0 - p));
  auto ones = torch::ones({B, T, C}, torch::TensorOptions(kGpu));
  auto checkMask = [&](const std::string& name, uint64_t key, const torch::Tensor& forward,
                       const torch::Tensor& backward) {
    auto want = cpuMask(n, p, key) * scale;
    auto got = toHost(forward).to(torch::kFloat32).view({-1}),
         gotBack = toHost(backward).to(torch::kFloat32).view({-1});
    const double kept = got.ne(0).to(torch::kFloat64).mean().item<double>();
    check(
        torch::equal(got, want) && torch::equal(gotBack, want) && std::abs(kept - (1 - p)) < 0.02,
        name + " dropout: the CPU's mask for the generator's key, forward and backward (kept " + fmtDouble(kept) + ")");
  };
  {
    auto y = ones.clone().requires_grad_();
    const uint64_t key = nextKey();
    AddNormed r = fusedAddNorm(torch::zeros_like(ones), y, torch::ones({C}, ones.options()),
                               torch::zeros({C}, ones.options()), 1e-5, p, torch::kFloat32);
    auto dy = torch::autograd::grad({r.out}, {y}, {ones})[0];  // dNormed undefined: dX = dOut = 1
    checkMask("add & norm", key, r.out, dy);
  }
  {
    auto h = ones.clone().requires_grad_();
    const uint64_t key = nextKey();
    auto out = fusedActivationDropout(h, Activation::Relu, p);
    checkMask("activation", key, out, torch::autograd::grad({out}, {h}, {ones})[0]);
  }
  {
    auto x = ones.clone().requires_grad_();
    const uint64_t key = nextKey();
    auto out = fusedEmbeddingDropout(x, 1.0, torch::Tensor(), p);
    checkMask("embedding", key, out, torch::autograd::grad({out}, {x}, {ones})[0]);
  }
}

// A forward captured in a CUDA graph reads the generator's state on the device: replays draw new
// masks, each at rate 1 - p.
void capturedDropoutAdvances() {
  torch::NoGradGuard noGrad;
  auto h = torch::ones({8, 64, 256}, torch::TensorOptions(kGpu));
  fusedActivationDropout(h, Activation::Relu, 0.5);  // warm-up outside the capture
  at::cuda::CUDAGraph graph;
  torch::Tensor out;
  auto stream = c10::cuda::getStreamFromPool();
  {
    c10::cuda::CUDAStreamGuard guard(stream);
    graph.capture_begin();
    out = fusedActivationDropout(h, Activation::Relu, 0.5);
    graph.capture_end();
  }
  graph.replay();
  auto first = out.clone();
  graph.replay();
  auto second = out.clone();
  torch::cuda::synchronize();
  const double kept1 = first.ne(0).to(torch::kFloat64).mean().item<double>();
  const double kept2 = second.ne(0).to(torch::kFloat64).mean().item<double>();
  check(!torch::equal(first, second) && std::abs(kept1 - 0.5) < 0.02 && std::abs(kept2 - 0.5) < 0.02,
        "dropout in a captured CUDA graph: a new mask per replay (kept " + fmtDouble(kept1) + ", " + fmtDouble(kept2) +
            ")");
}

void modelFusedMatchesUnfused() {
  struct Variant {
    std::string pos, activation;
    bool finalNorm;
  };
  const std::vector<Variant> variants = {
      {"sinusoidal", "gelu", true}, {"learned", "relu", true}, {"alibi", "gelu-tanh", true}, {"rotary", "gelu", false}};
  for (const auto& v : variants)
    for (auto dtype : {torch::kFloat32, torch::kBFloat16}) {
      auto cfg = test::tinyConfig(v.pos);
      cfg.dModel = 64, cfg.ffn = 256, cfg.heads = 4, cfg.activation = v.activation, cfg.finalNorm = v.finalNorm;
      Transformer cpu(cfg);
      cpu->train();
      Transformer fused = test::copyOnto(cpu, {kGpu, dtype});
      Transformer unfused = test::copyOnto(cpu, {kGpu, dtype});
      unfused->setFusedElementwise(false);
      torch::manual_seed(5);
      auto tokens = torch::randint(0, cfg.vocabSize, {3, 48}, torch::kLong);
      auto targets = torch::randint(0, cfg.vocabSize, {3 * 48}, torch::kLong);
      Pass a = runPass(unfused, tokens, targets), b = runPass(fused, tokens, targets);
      double worstGrad = 0;
      bool sameSet = a.grads.size() == b.grads.size();
      for (const auto& [name, grad] : a.grads) {
        if (!b.grads.count(name)) {
          sameSet = false;
          continue;
        }
        worstGrad = std::max(worstGrad, checks::relativeRms(grad, b.grads.at(name), 1e-6));
      }
      const double feat = relativeMaxDiff(a.features, b.features);
      const double nll = std::abs(a.nll.item<double>() - b.nll.item<double>()) / a.nll.item<double>();
      const double tol = dtype == torch::kBFloat16 ? 2e-2 : 1e-4;
      check(sameSet && feat <= tol && nll <= tol && worstGrad <= tol,
            "model " + v.pos + " " + v.activation + (v.finalNorm ? "" : " (no final norm)") + " " + dtypeName(dtype) +
                ": fused vs LibTorch's operators: features " + fmtDouble(feat) + ", loss " + fmtDouble(nll) +
                ", worst gradient (relative RMS) " + fmtDouble(worstGrad));
    }
}

#endif  // XTRAP_WITH_CUDA_KERNELS

}  // namespace

int main() {
  if (const int status = checks::skipStatus(/*needsKernels=*/true)) return status;
#ifdef XTRAP_WITH_CUDA_KERNELS
  return checks::runChecks("fused_elementwise_checks", [] {
    addNormMatchesOperators();
    activationMatchesOperators();
    embeddingMatchesOperators();
    dropoutMasksMatchCpu();
    capturedDropoutAdvances();
    modelFusedMatchesUnfused();
  });
#endif
}
