// GPU test (ctest label gpu): xtrap on CUDA against xtrap on the CPU. Per position method,
// decoder and encoder: CUDA features and every parameter gradient equal the CPU reference path's
// (fp32) on each path CUDA takes, and bf16 on CUDA stays within a stated tolerance of fp32 on the
// CPU, and so do models of the pretrained rotary families' block parts; a run trained on one device evaluates on the
// other with the same NLL; attention probes (an AttentionObserver, and the probe module's pooled pictures) agree; a
// torchrun job of one rank on NCCL trains like a single process; InPlaceAdamW on CUDA (PyTorch's fused multi-tensor
// kernel where LibTorch has it) takes LibTorch AdamW's steps on the CPU; linearNll's CUDA passes
// equal their formulas; rotary's CUDA kernel equals its LibTorch operators; no label reaches an
// encoder's logits at its masked positions on any path CUDA takes. Without CUDA it reports
// itself skipped (exit 77).
// Built everywhere (LibTorch CPU included): it uses no CUDA header, only torch::cuda::* and
// torch::Device(torch::kCUDA).
#include <torch/torch.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "../one_rank_job.h"
#include "../test_support.h"
#include "attention_dump.h"
#include "check_report.h"
#include "data/wikitext.h"
#include "eval/encoder_score.h"
#include "eval/evaluate_run.h"
#include "eval/perplexity.h"
#include "model/linear_nll.h"
#include "model_pass.h"
#include "run/checkpoint.h"
#include "train/in_place_adamw.h"
#include "util/execution_context.h"
#include "util/torch_compat.h"

#ifdef XTRAP_WITH_CUDA_KERNELS
#include "model/linear_nll_cuda.h"
#include "model/position/rotary.h"
#include "model/position/rotary_cuda.h"
#endif

using namespace xtrap;
using checks::check;
using checks::fmtDouble;
using checks::Pass;
using checks::relativeMaxDiff;
using checks::relativeRms;
using checks::runPass;

namespace {

const ExecutionContext kCpu{torch::kCPU, torch::kFloat32};
const ExecutionContext kCuda{torch::Device(torch::kCUDA), torch::kFloat32};
const ExecutionContext kCudaBf16{torch::Device(torch::kCUDA), torch::kBFloat16};

// CUDA vs CPU for one model: fp32 on every path CUDA takes, and bf16 CUDA against fp32 CPU.
void devicesAgree(const std::string& name, const ModelConfig& cfg) {
  constexpr int64_t T = 300;  // long enough for the CPU's causal-skip path to split
  Transformer cpu(cfg);
  cpu->eval();
  test::spreadFirstTokenBias(cpu);
  torch::manual_seed(3);
  auto tokens = torch::randint(0, cfg.vocabSize, {2, T}, torch::kLong);
  auto targets = torch::randint(0, cfg.vocabSize, {2 * T}, torch::kLong);
  ForwardOptions reference;
  reference.path = AttentionPath::Reference;
  Pass expected = runPass(cpu, tokens, targets, reference);

  Transformer gpu = test::copyOnto(cpu, kCuda);
  std::vector<std::pair<std::string, ForwardOptions>> paths{{"planned", ForwardOptions{}}, {"reference", reference}};
  ForwardOptions block;
  block.path = AttentionPath::Block;
  block.queryBlock = 64;
  paths.push_back({"block 64", block});
  // A parameter whose gradient is zero in exact arithmetic holds rounding noise only (FIRE's
  // mlp_out.bias adds one constant to every logit of a head, which softmax ignores: ~1e-10),
  // which two computations cannot share. Gradients are judged against the model's gradient
  // scale: differences relative to max(this parameter's largest, 1e-3 of all parameters'
  // largest) in fp32; RMS relative to max(its RMS, 1e-2 of the largest parameter's RMS) in bf16.
  double gradMax = 0, gradRms = 0;
  for (const auto& [param, grad] : expected.grads) {
    gradMax = std::max(gradMax, checks::maxAbs(grad));
    gradRms = std::max(gradRms, checks::rms(grad));
  }
  for (const auto& [pathName, opt] : paths) {
    Pass got = runPass(gpu, tokens, targets, opt);
    double worstGrad = 0;
    bool sameSet = got.grads.size() == expected.grads.size();
    for (const auto& [param, grad] : expected.grads) {
      if (!got.grads.count(param)) {
        sameSet = false;
        continue;
      }
      worstGrad = std::max(worstGrad, relativeMaxDiff(grad, got.grads.at(param), 1e-3 * gradMax));
    }
    double feat = relativeMaxDiff(expected.features, got.features);
    // fp32 on both: different kernels and summation orders, ~1e-6 relative; 1e-3 is generous.
    check(sameSet && feat <= 1e-3 && worstGrad <= 1e-3,
          name + ": CUDA fp32 (" + pathName + ") vs CPU reference: features " + fmtDouble(feat) + ", worst gradient " +
              fmtDouble(worstGrad) + " (relative to max, tolerance 1e-3)");
  }

  // bf16 keeps 8 significant bits: each rounding is 2^-9 relative, and two layers of matmuls
  // (float32 softmax and LayerNorm) leave the features within ~1% RMS of fp32. Stated
  // tolerances: features 5% RMS, NLL 1%, gradients 10% RMS of each parameter's gradient.
  Transformer half = test::copyOnto(cpu, kCudaBf16);
  Pass low = runPass(half, tokens, targets, ForwardOptions{});
  double featRms = relativeRms(expected.features, low.features);
  double nllRel = std::abs(low.nll.item<double>() - expected.nll.item<double>()) / expected.nll.item<double>();
  double worstGradRms = 0;
  for (const auto& [param, grad] : expected.grads)
    if (low.grads.count(param))
      worstGradRms = std::max(worstGradRms, relativeRms(grad, low.grads.at(param), 1e-2 * gradRms));
  check(featRms <= 0.05 && nllRel <= 0.01 && worstGradRms <= 0.10,
        name + ": CUDA bf16 vs CPU fp32: features RMS " + fmtDouble(featRms) + " (<= 0.05), NLL " + fmtDouble(nllRel) +
            " (<= 0.01), worst gradient RMS " + fmtDouble(worstGradRms) + " (<= 0.10)");
}

void devicesAgreePerMethod() {
  for (const auto& m : test::everyMethod()) {
    auto cfg = test::tinyConfig(m.pos, m.arch);
    cfg.maxPositions = 512;
    devicesAgree(m.arch + " " + m.pos, cfg);
  }
}

// The block parts of the pretrained rotary families (run/families/): a Llama-style model (RMSNorm,
// SwiGLU, 4 heads over 2 key/value heads, a checkpoint's linear rope scaling, half the channels
// rotated, a 100-token window, untied head) and a Gemma-2-style one (x_hat (1 + w) norms, four a
// block, GeGLU, one key/value head, soft-caps, query_pre_attn_scalar, windowed even layers).
void devicesAgreeOnRotaryFamilyParts() {
  auto llama = test::tinyConfig("rotary");
  llama.norm = "rms", llama.gatedMlp = true, llama.activation = "silu", llama.kvHeads = 2;
  llama.linearBiases = false, llama.tiedHead = false, llama.rotaryFraction = 0.5, llama.attentionWindow = 100;
  llama.ropeScaling.type = "linear", llama.ropeScaling.factor = 2.0;
  devicesAgree("llama-style parts", llama);
  auto gemma = test::tinyConfig("rotary");
  gemma.norm = "rms-one-plus", gemma.blockNorms = "sandwich", gemma.gatedMlp = true, gemma.activation = "gelu-tanh";
  gemma.kvHeads = 1, gemma.linearBiases = false, gemma.attentionSoftcap = 5.0, gemma.finalSoftcap = 3.0;
  gemma.queryScale = 0.3, gemma.attentionWindow = 50, gemma.windowedLayers = {0};
  gemma.embeddingScaleRounded = true;
  devicesAgree("gemma2-style parts", gemma);
}

// Context extension (model/context_extension.h) on CUDA, fp32 and bf16, against the CPU: every
// method at defaults derived from L_train = 16 (windows of 300 tokens), for rotary, ALiBi, T5,
// KERPLE-log and FIRE decoders, sinks / lambda / logn for NoPE, and the mirrored methods of
// rotary, ALiBi and BiALiBi encoders.
void devicesAgreeOnContextExtension() {
  constexpr int64_t T = 300;
  const std::vector<std::pair<std::string, std::string>> models = {
      {"rotary", "decoder"}, {"alibi", "decoder"},      {"none", "decoder"},
      {"t5", "decoder"},     {"kerple-log", "decoder"}, {"fire", "decoder"},
      {"rotary", "encoder"}, {"alibi", "encoder"},      {"bialibi", "encoder"}};
  for (const auto& [pos, arch] : models) {
    auto cfg = test::tinyConfig(pos, arch);
    cfg.maxPositions = 512;
    Transformer cpu(cfg);
    cpu->eval();
    torch::NoGradGuard noGrad;
    torch::manual_seed(5);
    auto tokens = torch::randint(0, cfg.vocabSize, {2, T}, torch::kLong);
    for (std::string name : {"sinks", "lambda", "self-extend", "rerope", "leaky-rerope+logn", "logn"}) {
      bool maskOnly = name == "sinks" || name == "lambda" || name == "logn";
      if ((pos == "none" && !maskOnly) || (arch == "encoder" && (name == "sinks" || name == "lambda"))) continue;
      ContextExtension e = resolveContextExtension(name, {}, cfg.contextLength);
      cpu->setContextExtension(e);
      auto expected = cpu->features(tokens);
      for (const ExecutionContext& ctx : {kCuda, kCudaBf16}) {
        Transformer gpu = test::copyOnto(cpu, ctx);
        gpu->setContextExtension(e);
        auto got = gpu->features(tokens).cpu();
        bool bf16 = ctx.dtype == torch::kBFloat16;
        double diff = bf16 ? relativeRms(expected, got) : relativeMaxDiff(expected, got);
        double tolerance = bf16 ? 0.05 : 1e-3;
        check(diff <= tolerance, pos + " " + arch + " --extend " + e.label() + ": CUDA " + (bf16 ? "bf16" : "fp32") +
                                     " vs CPU: features " + fmtDouble(diff) + " (tolerance " + fmtDouble(tolerance) +
                                     (bf16 ? ", RMS)" : ", relative to max)"));
      }
    }
    cpu->setContextExtension({});
  }
}

// No label reaches an encoder's logits at its masked positions (test::labelLeak, issue 59), for
// every encoder position method on the paths CUDA takes: planned in fp32 (SDPA where LibTorch has
// it) and in bf16 (the fused kernel for the ALiBi family in a build with the kernels: 2 heads of
// 64), reference and block. The CPU paths' check is in test_encoder.cpp.
void labelsDoNotLeak() {
  constexpr int64_t T = 300;
  for (const auto& m : test::everyMethod()) {
    if (m.arch != "encoder") continue;
    auto cfg = test::tinyConfig(m.pos, m.arch, 2);
    cfg.dModel = 128;
    cfg.maxPositions = 512;
    Transformer cpu(cfg);
    cpu->eval();
    test::spreadFirstTokenBias(cpu);
    ForwardOptions reference, block;
    reference.path = AttentionPath::Reference;
    block.path = AttentionPath::Block;
    block.queryBlock = 64;
    for (const ExecutionContext& ctx : {kCuda, kCudaBf16}) {
      Transformer gpu = test::copyOnto(cpu, ctx);
      std::string precision = ctx.dtype == torch::kBFloat16 ? "bf16" : "fp32";
      for (const auto& [pathName, opt] : std::vector<std::pair<std::string, ForwardOptions>>{
               {"planned " + attentionPathName(gpu->attentionPath(T, {})), ForwardOptions{}},
               {"reference", reference},
               {"block 64", block}}) {
        test::LabelLeak leak = test::labelLeak(gpu, T, opt, 17);
        check(leak.masked <= 1e-6 && leak.visible > 0.01,
              "encoder " + m.pos + " CUDA " + precision + " (" + pathName +
                  "): the logits at masked positions move by " + fmtDouble(leak.masked) +
                  " when their targets change elsewhere in the batch (<= 1e-6), by " + fmtDouble(leak.visible) +
                  " when row 0 shows them (> 0.01)");
      }
    }
  }
}

// Beyond L, on the block path too.
double meanValidNll(Transformer& model, size_t n) {
  return test::meanValidNll(model, n, 4 * model->config.contextLength, 16);
}

void withDevice(TrainConfig& t, const std::string& device) {
  t.device = device;
  t.lr = 1e-2;
  t.warmupSteps = 2;
  t.evalTokens = 2048;
}

// Trained on one device, evaluated on both: the same weights score the same NLL.
void runsMoveBetweenDevices() {
  for (test::Method m :
       {test::Method{"alibi", "decoder"}, test::Method{"bialibi", "encoder"}, test::Method{"rotary", "decoder"}}) {
    for (std::string trainedOn : {"cuda", "cpu"}) {
      std::string name = m.arch + " " + m.pos + " trained on " + trainedOn;
      RunInfo run =
          test::trainTiny("gpu-moves-" + m.arch + "-" + m.pos + "-" + trainedOn, test::tinyConfig(m.pos, m.arch), 15, 1,
                          [&](TrainConfig& t) { withDevice(t, trainedOn); });
      check(run.train.device == trainedOn, name + ": run.json records device " + run.train.device);
      Transformer onCpu = loadTrainedModel(run, kCpu);
      Transformer onCuda = loadTrainedModel(run, kCuda);
      check(onCuda->device().is_cuda() && onCpu->device().is_cpu(), name + ": loaded onto the devices asked for");
      double cpuNll = meanValidNll(onCpu, 3000), cudaNll = meanValidNll(onCuda, 3000);
      double rel = std::abs(cpuNll - cudaNll) / cpuNll;
      check(std::isfinite(cpuNll) && rel <= 1e-4, name + ": valid NLL at 4L on the CPU " + fmtDouble(cpuNll) +
                                                      ", on CUDA " + fmtDouble(cudaNll) + " (relative " +
                                                      fmtDouble(rel) + ", tolerance 1e-4)");
      Transformer onCudaBf16 = loadTrainedModel(run, kCudaBf16);
      double bf16Nll = meanValidNll(onCudaBf16, 3000);
      double relBf16 = std::abs(bf16Nll - cpuNll) / cpuNll;
      check(relBf16 <= 0.01, name + ": valid NLL in bf16 on CUDA " + fmtDouble(bf16Nll) + " (relative " +
                                 fmtDouble(relBf16) + ", tolerance 0.01)");
    }
  }
}

// Evaluation rows on CUDA record the pass's peak GPU memory; the model's parameters live on the GPU
// throughout, so the peak is at least their size. CPU rows record none (-1).
void evalRowsRecordPeakMemory() {
  RunInfo run = test::trainTiny("gpu-peak-memory", test::tinyConfig("alibi"), 5);
  double parameterMiB = 0;
  for (const auto& p : Transformer(run.model)->parameters()) parameterMiB += double(p.numel()) * 4 / (1 << 20);
  for (std::string device : {"cuda", "cpu"}) {
    EvalRequest req;
    req.runs = {run.dir};
    req.lvalids = {64, 256};
    req.maxTokens = 3000;
    req.progress = false;
    req.device = device;
    for (const EvalRow& r : evaluateRuns(req)) {
      bool ok = device == "cuda" ? r.peakMemoryMiB >= parameterMiB : r.peakMemoryMiB == -1;
      check(ok, "eval on " + device + " Lvalid " + std::to_string(r.Lvalid) + ": peak_mib " +
                    fmtDouble(r.peakMemoryMiB) +
                    (device == "cuda" ? " (>= the parameters' " + fmtDouble(parameterMiB) + " MiB)" : " (-1: none)"));
    }
  }
}

// Every probability an observer sees, on the host in float64, keyed by (layer, first query row).
struct AllProbabilities : AttentionObserver {
  std::map<std::pair<int64_t, int64_t>, torch::Tensor> blocks;
  void onProbabilities(int64_t layer, int64_t q0, const torch::Tensor& probs) override {
    blocks[{layer, q0}] = toHost(probs).to(torch::kFloat64);
  }
};

void probesAgree() {
  for (test::Method m :
       {test::Method{"alibi", "decoder"}, test::Method{"t5", "encoder"}, test::Method{"bialibi", "encoder"}}) {
    std::string name = m.arch + " " + m.pos;
    RunInfo run = test::trainTiny("gpu-probe-" + m.arch + "-" + m.pos, test::tinyConfig(m.pos, m.arch), 5);
    Transformer onCpu = loadTrainedModel(run, kCpu);
    Transformer onCuda = loadTrainedModel(run, kCuda);
    std::vector<int64_t> window(test::shippedCorpus().valid.begin(), test::shippedCorpus().valid.begin() + 96);
    auto tokens = torch::tensor(window).unsqueeze(0);  // (1, 96)
    for (int64_t queryBlock : {0, 32}) {
      AllProbabilities cpuSeen, cudaSeen;
      ForwardOptions opt;
      opt.queryBlock = queryBlock;
      opt.observer = &cpuSeen;
      torch::NoGradGuard g;
      onCpu->features(tokens, opt);
      opt.observer = &cudaSeen;
      onCuda->features(tokens, opt);
      bool same = cpuSeen.blocks.size() == cudaSeen.blocks.size() && !cpuSeen.blocks.empty();
      double worst = 0;
      for (const auto& [key, probs] : cpuSeen.blocks) {
        if (!cudaSeen.blocks.count(key) || cudaSeen.blocks.at(key).sizes() != probs.sizes()) {
          same = false;
          continue;
        }
        worst = std::max(worst, (probs - cudaSeen.blocks.at(key)).abs().max().item<double>());
      }
      check(same && worst <= 1e-5, name + ": observer probabilities, query block " + std::to_string(queryBlock) +
                                       ", CUDA vs CPU: " + std::to_string(cpuSeen.blocks.size()) +
                                       " blocks, max difference " + fmtDouble(worst) + " (tolerance 1e-5)");
    }
    // The probe module's own path (pooled maps, mean distances) on both devices.
    AttentionDumpRequest req;
    req.Lvalid = 96;
    req.queryBlock = 32;
    ProbeText text = corpusProbeText(std::make_shared<const Corpus>(test::shippedCorpus()), "valid");
    RunPicture cpuPicture = attentionPicture(run, onCpu, text, req, 16);
    RunPicture cudaPicture = attentionPicture(run, onCuda, text, req, 16);
    bool same = cpuPicture.heads.size() == cudaPicture.heads.size() && !cpuPicture.heads.empty();
    double worst = 0;
    for (size_t h = 0; same && h < cpuPicture.heads.size(); ++h) {
      const auto &a = cpuPicture.heads[h], &b = cudaPicture.heads[h];
      same = a.map.size() == b.map.size() && a.meanDistance.size() == b.meanDistance.size();
      for (size_t i = 0; same && i < a.map.size(); ++i) worst = std::max(worst, double(std::abs(a.map[i] - b.map[i])));
      for (size_t i = 0; same && i < a.meanDistance.size(); ++i)
        worst = std::max(worst, double(std::abs(a.meanDistance[i] - b.meanDistance[i])) / 96.0);
    }
    check(same && worst <= 1e-5, name + ": attention pictures CUDA vs CPU, max difference " + fmtDouble(worst) +
                                     " (mean distances over N; tolerance 1e-5)");
  }
}

// InPlaceAdamW on CUDA against LibTorch's own AdamW on the CPU: two groups (decay on a matrix of
// more than one 2^20 slice, none on a vector), a parameter without a gradient in one step, five
// steps; every parameter within float32 rounding of the reference.
void adamwOnCudaMatchesCpu() {
  torch::manual_seed(9);
  auto w0 = torch::randn({1100, 1000}), b0 = torch::randn({7}), u0 = torch::randn({3, 5});
  auto makeGroups = [](std::vector<torch::Tensor> decayed, std::vector<torch::Tensor> plain) {
    auto options = torch::optim::AdamWOptions(0.01).betas({0.9, 0.98}).weight_decay(0.1);
    auto noDecay = options;
    noDecay.weight_decay(0.0);
    std::vector<torch::optim::OptimizerParamGroup> groups;
    groups.emplace_back(decayed, std::make_unique<torch::optim::AdamWOptions>(options));
    groups.emplace_back(plain, std::make_unique<torch::optim::AdamWOptions>(noDecay));
    return groups;
  };
  auto cpu = [](const torch::Tensor& t) { return t.clone().requires_grad_(); };
  auto gpu = [](const torch::Tensor& t) { return t.to(torch::kCUDA).requires_grad_(); };
  std::vector<torch::Tensor> ref{cpu(w0), cpu(b0), cpu(u0)}, mine{gpu(w0), gpu(b0), gpu(u0)};
  torch::optim::AdamW reference(makeGroups({ref[0], ref[2]}, {ref[1]}), torch::optim::AdamWOptions(0.01));
  InPlaceAdamW fused(makeGroups({mine[0], mine[2]}, {mine[1]}), torch::optim::AdamWOptions(0.01));
  for (int step = 0; step < 5; ++step) {
    for (size_t i = 0; i < ref.size(); ++i) {
      bool skip = step == 2 && i == 2;  // u has no gradient in step 2: its step count falls behind
      auto g = skip ? torch::Tensor() : torch::randn_like(ref[i]);
      ref[i].mutable_grad() = g;
      mine[i].mutable_grad() = skip ? torch::Tensor() : g.to(torch::kCUDA);
    }
    reference.step();
    fused.step();
  }
  double worst = 0;
  for (size_t i = 0; i < ref.size(); ++i)
    worst = std::max(worst, relativeMaxDiff(ref[i].detach(), toHost(mine[i].detach())));
  check(worst <= 1e-5, std::string("InPlaceAdamW on CUDA (") +
                           (compat::kHasFusedAdamW ? "fused multi-tensor kernel" : "slices") +
                           ") vs LibTorch AdamW on the CPU, 5 steps, 2 groups: worst parameter difference " +
                           fmtDouble(worst) + " relative to its largest element (tolerance 1e-5)");
}

// linearNll's CUDA passes (linear_nll.cu) on bf16 logits against the formulas of linear_nll.cuh in
// float64 on the same logits: a block of 3000 classes (16-byte loads) and one of 1003 (a tail one
// at a time), targets inside and outside the block. Then linearNll itself, bf16 on CUDA (these
// passes, two blocks of classes) against float32 on the CPU: values and every gradient.
void fusedNllPassesAgree() {
#ifndef XTRAP_WITH_CUDA_KERNELS
  std::puts("skip  linearNll's CUDA passes: this build has no CUDA kernels");
#else
  torch::manual_seed(5);
  const torch::Device gpu(torch::kCUDA);
  const int64_t N = 1000, begin = 500;
  for (int64_t n : {3000, 1003}) {
    auto logits = (torch::randn({N, n}) * 4).to(gpu, torch::kBFloat16);  // (N, n)
    auto bias = torch::randn({n}).to(gpu);
    auto targets = torch::randint(0, 4000, {N}, torch::kLong).to(gpu);
    auto lseBefore = torch::randn({N}).to(gpu);
    auto lse = lseBefore.clone(), targetLogit = torch::full({N}, -7.f, lse.options());
    fusedNllBlockForward(logits, bias, targets, begin, lse, targetLogit);
    auto x = logits.to(torch::kFloat64) + bias.to(torch::kFloat64);  // (N, n)
    auto local = targets - begin, inBlock = (local >= 0) & (local < n);
    auto wantLse = torch::logaddexp(lseBefore.to(torch::kFloat64), x.logsumexp(1));
    auto wantTarget = torch::where(inBlock, x.gather(1, local.clamp(0, n - 1).unsqueeze(1)).squeeze(1),
                                   torch::full({N}, -7.0, x.options()));
    double lseDiff = relativeMaxDiff(wantLse, lse), targetDiff = relativeMaxDiff(wantTarget, targetLogit);
    check(lseDiff <= 1e-6 && targetDiff <= 1e-6,
          "linearNll's CUDA forward pass, " + std::to_string(n) + " classes: log-sum-exp " + fmtDouble(lseDiff) +
              ", target logits " + fmtDouble(targetDiff) + " from float64 (tolerance 1e-6)");
    auto gradNll = torch::rand({N}).to(gpu);
    auto grad = fusedNllBlockGradient(logits, bias, targets, begin, lse, gradNll);
    auto onehot = torch::zeros({N, n}, x.options())
                      .scatter_(1, local.clamp(0, n - 1).unsqueeze(1), inBlock.to(torch::kFloat64).unsqueeze(1));
    auto want = ((x - lse.to(torch::kFloat64).unsqueeze(1)).exp() - onehot) * gradNll.to(torch::kFloat64).unsqueeze(1);
    // Each element rounded once to bf16 (8 significant bits): within 2^-8 of itself.
    auto worst = ((grad.to(torch::kFloat64) - want).abs() / (want.abs() + 1e-30)).max().item<double>();
    check(worst <= 4e-3, "linearNll's CUDA backward pass, " + std::to_string(n) +
                             " classes: worst element relative to itself " + fmtDouble(worst) +
                             " from float64 (tolerance 4e-3, one bf16 rounding)");
  }
  // Through linearNll: bf16 operands on CUDA against float32 on the CPU, in two blocks of classes
  // whose logits the backward recomputes, and with the default blocks: one, its logits kept.
  auto x = torch::randn({600, 64}), w = torch::randn({5000, 64}) * 0.3, b = torch::randn({5000});
  auto targets = torch::randint(0, 5000, {600}, torch::kLong);
  auto run = [&](const torch::Device& device, torch::ScalarType dtype, int64_t maxBlockLogits) {
    auto xi = x.to(device, dtype).detach().requires_grad_(), wi = w.to(device, dtype).detach().requires_grad_();
    auto bi = b.to(device).detach().requires_grad_();
    auto nll = linearNll(xi, wi, bi, targets.to(device), maxBlockLogits);  // (600)
    (nll * torch::linspace(0.5, 1.5, 600, nll.options())).sum().backward();
    return std::vector<torch::Tensor>{toHost(nll), toHost(xi.grad()), toHost(wi.grad()), toHost(bi.grad())};
  };
  auto want = run(torch::kCPU, torch::kFloat32, 0);
  const char* names[] = {"nll", "dx", "dW", "dbias"};
  for (int64_t maxBlockLogits : {int64_t(600 * 3000), int64_t(0)}) {
    auto got = run(gpu, torch::kBFloat16, maxBlockLogits);
    for (size_t i = 0; i < want.size(); ++i) {
      double diff = relativeRms(want[i], got[i]);
      check(diff <= 0.02, std::string("linearNll bf16 on CUDA (fused passes, ") +
                              (maxBlockLogits ? "2 blocks recomputed" : "1 block kept") + ") vs float32 on the CPU: " +
                              names[i] + " relative RMS " + fmtDouble(diff) + " (tolerance 0.02, bf16 operands)");
    }
  }
#endif
}

// Rotary's CUDA kernel (rotary.cu), through Rotary::apply on bf16 on CUDA, against Rotary::apply's
// LibTorch operators on the same GPU in float32 from the same bf16 values: the same values as
// theirs rounded to bf16, as the operators' bf16 path rounds them (rotary.cuh), forward and the
// gradient of q. q is the strided view of a fused (B, T, 3, H, D) projection, as in the model, at
// an offset; once plain, once with YaRN's frequency factors, attention factor and a position scale.
void fusedRotaryAgrees() {
#ifndef XTRAP_WITH_CUDA_KERNELS
  std::puts("skip  rotary's CUDA kernel: this build has no CUDA kernels");
#else
  torch::manual_seed(9);
  const torch::Device gpu(torch::kCUDA);
  const int64_t B = 3, T = 300, H = 4, D = 64, offset = 7;
  auto projection = torch::randn({B, T, 3, H, D}).to(gpu, torch::kBFloat16);  // (B, T, 3, H, D)
  auto upstream = torch::randn({B, H, T, D}).to(gpu, torch::kBFloat16);       // dL/dy
  for (bool yarn : {false, true}) {
    Rotary rotary{D, 10000.0, 1.0};
    if (yarn) {
      rotary.positionScale = 2.0, rotary.attentionFactor = 0.8;
      for (int64_t p = 0; p < D / 2; ++p) rotary.frequencyFactors.push_back(1.0 - 0.75 * double(p) / (D / 2));
    }
    const std::string what = yarn ? "with YaRN's factors" : "plain";
    auto qkv = projection.clone().requires_grad_();
    auto q = qkv.select(2, 0).permute({0, 2, 1, 3});  // (B, H, T, D) view
    check(fusedRotaryTakes(q), "rotary's CUDA kernel takes q of a fused bf16 projection on this GPU");
    auto y = rotary.apply(q, offset);
    y.backward(upstream);
    auto dq = qkv.grad().select(2, 0).permute({0, 2, 1, 3});

    auto q32 = q.detach().to(torch::kFloat32).requires_grad_();
    auto y32 = rotary.apply(q32, offset);
    y32.backward(upstream.to(torch::kFloat32));
    const double forwardDiff = relativeMaxDiff(y32.to(torch::kBFloat16), y);
    const double backwardDiff = relativeMaxDiff(q32.grad().to(torch::kBFloat16), dq);
    check(torch::equal(y.detach(), y32.detach().to(torch::kBFloat16)),
          "rotary's CUDA kernel (" + what + ") equals the LibTorch operators' bf16 values: largest difference " +
              fmtDouble(forwardDiff) + " of the largest element");
    check(torch::equal(dq, q32.grad().to(torch::kBFloat16)),
          "rotary's CUDA kernel's gradient of q (" + what +
              ") equals the LibTorch operators' bf16 values: largest difference " + fmtDouble(backwardDiff) +
              " of the largest element");
  }
#endif
}

// A torchrun job of one rank (this process hosts the store, as the launcher does) trains on
// NCCL exactly as a single process: an all-reduce over one rank is the identity. The host-read
// step (--cuda-graph off), whose buckets all-reduce during backward; the captured step's single
// all-reduce is captured_step_checks'.
void ncclOneRankTrainingStep() {
#ifndef XTRAP_WITH_NCCL
  std::puts("skip  one-rank NCCL training: this LibTorch has no NCCL");
#else
  auto cfg = test::tinyConfig("alibi");
  auto setup = [](TrainConfig& t) { withDevice(t, "cuda"); };
  auto hostRead = [](TrainRequest& r) { r.cudaGraph = "off"; };
  RunInfo single = test::trainTiny("gpu-nccl-single", cfg, 3, 1, setup, hostRead);
  RunInfo ranked;
  {
    test::OneRankEnvironment job;
    check(distEnvFromEnvironment().launched, "one-rank torchrun environment set");
    ranked = test::trainTiny("gpu-nccl-ranked", cfg, 3, 1, setup, hostRead);
  }
  auto a = test::loggedLosses(single), b = test::loggedLosses(ranked);
  const double worst = test::worstRelative(a, b);
  // Same GPU, same data order and seed: only CUDA's atomic adds (embedding backward) may differ.
  check(worst <= 1e-4, "one-rank NCCL job vs single process, 3 steps on CUDA: worst relative loss difference " +
                           fmtDouble(worst) + " (tolerance 1e-4)");
  double fa = single.extra.value("final_val_loss", NAN), fb = ranked.extra.value("final_val_loss", NAN);
  check(std::abs(fa - fb) <= 1e-4 * std::abs(fa),
        "one-rank NCCL job vs single process: final validation loss " + fmtDouble(fa) + " vs " + fmtDouble(fb));
#endif
}

}  // namespace

int main() {
  if (const int status = checks::skipStatus(/*needsKernels=*/false)) return status;
  torch::manual_seed(0);
  return checks::runChecks("gpu_checks", [] {
    devicesAgreePerMethod();
    devicesAgreeOnRotaryFamilyParts();
    devicesAgreeOnContextExtension();
    labelsDoNotLeak();
    runsMoveBetweenDevices();
    evalRowsRecordPeakMemory();
    probesAgree();
    adamwOnCudaMatchesCpu();
    fusedNllPassesAgree();
    fusedRotaryAgrees();
    ncclOneRankTrainingStep();
  });
}
