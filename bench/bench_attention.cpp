// Google Benchmark micro-benchmarks of xtrap's hot spots (issue 7):
//  - one attention layer, forward and forward + backward, for every position method, at
//    L = 512 and 2048, on the full-matrix and the query-block paths;
//  - the loss head, full tied softmax vs adaptive softmax;
//  - training-batch assembly (sampler + gather);
//  - a square sgemm, the machine's matmul peak that MFU is measured against.
// Items processed are tokens (attention, batching) or rows (head), so the reports read as
// tokens/s. Sizes are the quickstart model's (d = 128, 8 heads); 2048 tokens per iteration.
// Threads: --threads is not a Google Benchmark flag; set XTRAP_THREADS (default 2).
// Where LibTorch has CUDA (XTRAP_WITH_CUDA_KERNELS), `--fused-csv FILE [--fused-reps N]
// [--fused-cases A,B] [--fused-backward two-pass|atomic|wgmma|atomic-wgmma|all]` instead times the
// fused ALiBi-family kernel (issue 23 item 5) at bench/attention_anchors.py's cases (or the cases
// named), with each backward scheme, each with mma.sync's tile products and with the warpgroup
// MMA's (wgmma; default all), and writes its CSV columns (bench/fused_attention.sh joins the
// two; bench/gpu_check.sh's ncu stage profiles one case and scheme).
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <numeric>
#include <optional>

#ifdef XTRAP_WITH_CUDA_KERNELS
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <iterator>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "model/linear_bias_spec.h"
#include "model/position/linear_bias.h"
#include "model/position/linear_bias_attention.cuh"
#include "model/position/linear_bias_attention_cuda.h"
#include "util/execution_context.h"
#endif

#include "data/block_sampler.h"
#include "data/masked_batch.h"
#include "model/attention.h"
#include "model/transformer.h"
#include "train/objective.h"
#include "util/runtime.h"

namespace xtrap {
namespace {

const char* kPositions[] = {"none",  "sinusoidal",   "learned",        "rotary",        "t5",
                            "alibi", "alibi-offset", "alibi-onesided", "alibi-learned", "bialibi"};
constexpr int64_t kTokensPerIteration = 2048;

ModelConfig benchConfig(const std::string& pos, int64_t L) {
  ModelConfig c;
  c.pos = pos;
  // The linear-bias variants that look both ways (or learn both slopes) are encoder methods.
  bool encoderOnly = pos == "alibi-offset" || pos == "alibi-onesided" || pos == "alibi-learned" || pos == "bialibi";
  c.arch = encoderOnly ? "encoder" : "decoder";
  c.layers = 1;
  c.contextLength = L;
  c.maxPositions = L;
  c.vocabSize = 1000;
  return c;
}

// args: position index, L, query block (0 = full path), backward (0/1).
void BM_Attention(benchmark::State& state) {
  std::string pos = kPositions[state.range(0)];
  int64_t L = state.range(1), queryBlock = state.range(2);
  bool backward = state.range(3) != 0;
  ModelConfig c = benchConfig(pos, L);
  Transformer model(c);
  model->train(backward);
  auto& attn = model->blocks[0]->as<TransformerBlock>()->attn;
  int64_t B = std::max<int64_t>(1, kTokensPerIteration / L);
  auto x = torch::randn({B, L, c.dModel}, torch::requires_grad(backward));
  AttentionBias* bias = model->attentionBias();
  bool cacheable = !bias || !bias->trainable();
  torch::Tensor cached = attentionBiasBlock(bias, c.causal(), 0, L, 0, L, x.options());
  ForwardOptions forward;
  forward.queryBlock = queryBlock;
  AttentionPath path = model->attentionPath(L, forward);
  std::optional<torch::NoGradGuard> noGrad;
  if (!backward) noGrad.emplace();
  for (auto _ : state) {
    AttentionContext ctx;
    ctx.path = path;
    ctx.causal = c.causal();
    ctx.bias = bias;
    ctx.rotary = model->rotary();
    ctx.queryBlock = queryBlock;
    // As TransformerImpl::features: a trainable bias is rebuilt every forward, a fixed one cached.
    if (pathUsesFullBias(path, model->biasKind()))
      ctx.fullBias = cacheable ? cached : attentionBiasBlock(bias, c.causal(), 0, L, 0, L, x.options());
    auto y = attn->forward(x, ctx);
    if (backward) y.sum().backward();
    benchmark::DoNotOptimize(y.data_ptr<float>());
  }
  state.SetItemsProcessed(state.iterations() * B * L);
  state.SetLabel(pos + " " + attentionPathName(path) + (backward ? " fwd+bwd" : " fwd"));
}

void attentionArgs(benchmark::internal::Benchmark* b) {
  for (int64_t pos = 0; pos < int64_t(std::size(kPositions)); ++pos)
    for (int64_t L : {512, 2048})
      for (int64_t block : {0, 256})
        for (int64_t backward : {0, 1}) b->Args({pos, L, block, backward});
}
BENCHMARK(BM_Attention)->Apply(attentionArgs)->Unit(benchmark::kMillisecond)->UseRealTime();

// args: adaptive (0/1). Forward + backward of the NLL of 4096 rows over the WikiText-103-sized
// vocabulary of the quickstart (33278 words).
void BM_LossHead(benchmark::State& state) {
  ModelConfig c = benchConfig("none", 512);
  c.vocabSize = 33278;
  if (state.range(0)) c.adaptiveSoftmaxCutoffs = {2000, 10000};
  Transformer model(c);
  constexpr int64_t kRows = 4096;
  auto x = torch::randn({kRows, c.dModel}, torch::requires_grad());
  // Zipf-like targets so the adaptive tails see their usual share of rows.
  auto targets = (torch::rand({kRows}).pow(4) * double(c.vocabSize - 1)).to(torch::kLong);
  for (auto _ : state) {
    auto loss = model->tokenNll(x, targets).mean();
    loss.backward();
    benchmark::DoNotOptimize(loss.data_ptr<float>());
  }
  state.SetItemsProcessed(state.iterations() * kRows);
  state.SetLabel(state.range(0) ? "adaptive 2000,10000" : "full tied softmax");
}
BENCHMARK(BM_LossHead)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond)->UseRealTime();

// One training step's batch: 8 random sequences of L + 1 tokens gathered into a tensor.
void BM_Batching(benchmark::State& state) {
  int64_t L = state.range(0), B = 8;
  std::vector<int32_t> stream(2'000'000);
  std::iota(stream.begin(), stream.end(), 0);
  BlockSampler sampler(int64_t(stream.size()), L + 1, false, 1);
  for (auto _ : state) {
    auto batch = gatherWindows(stream, sampler.next(B), L + 1);
    benchmark::DoNotOptimize(batch.data_ptr<int64_t>());
  }
  state.SetItemsProcessed(state.iterations() * B * L);
}
BENCHMARK(BM_Batching)->Arg(512)->Arg(2048)->Unit(benchmark::kMicrosecond)->UseRealTime();

// n x n x n float matmul: the achievable matmul peak that MFU is quoted against.
void BM_MatmulPeak(benchmark::State& state) {
  int64_t n = state.range(0);
  auto a = torch::randn({n, n}), b = torch::randn({n, n}), out = torch::empty({n, n});
  for (auto _ : state) {
    torch::mm_out(out, a, b);
    benchmark::DoNotOptimize(out.data_ptr<float>());
  }
  state.counters["GFLOP/s"] =
      benchmark::Counter(2.0 * double(n * n * n) * double(state.iterations()) / 1e9, benchmark::Counter::kIsRate);
}
BENCHMARK(BM_MatmulPeak)->Arg(512)->Arg(1024)->Arg(2048)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

#ifdef XTRAP_WITH_CUDA_KERNELS
namespace {

// One row of --fused-csv: the fused kernel, bf16 forward + backward (q, k, v and any learned slope
// parameters), median of `reps` after `warmup`, CUDA events on the current stream. FLOPs as
// bench/attention_anchors.py: 3.5 x 4 B H L^2 D, halved when every head sees one triangle.
struct FusedRow {
  std::string caseName, method;
  int64_t B, L;
  bool causal;
  PositionMethod pos;
  bool learned;        // causal learned slopes: alibi's spec with learnedSlopes (makeLinearBiasSpec has none)
  bool dense = false;  // every open tile pair computed: no negligible pair skipped
};
constexpr int64_t kFusedHeads = 16, kFusedHeadDim = 64;

std::vector<FusedRow> fusedRows() {
  std::vector<FusedRow> rows;
  // (B, L): issue 23's three, and the training length of the paper and the GPU scenarios (L 512), where
  // the tile bounds cost more against the pairs they can save.
  const std::pair<int64_t, int64_t> causalShapes[] = {{8, 2048}, {2, 8192}, {1, 16384}, {32, 512}};
  for (auto [B, L] : causalShapes) {
    std::string name = "causal-B" + std::to_string(B) + "-L" + std::to_string(L);
    rows.push_back({name, "xtrap-fused-fixed", B, L, true, PositionMethod::Alibi, false});
    rows.push_back({name, "xtrap-fused-learned", B, L, true, PositionMethod::Alibi, true});
    // What skipping the negligible pairs gains, beside the same kernel computing them all.
    rows.push_back({name, "xtrap-fused-fixed-dense", B, L, true, PositionMethod::Alibi, false, true});
  }
  auto encoder = [](const char* variant) { return std::string("encoder-") + variant + "-B8-L2048"; };
  rows.push_back({encoder("symmetric"), "xtrap-fused-symmetric", 8, 2048, false, PositionMethod::Alibi, false});
  rows.push_back({encoder("symmetric"), "xtrap-fused-learned", 8, 2048, false, PositionMethod::AlibiLearned, false});
  rows.push_back({encoder("offset"), "xtrap-fused-offset", 8, 2048, false, PositionMethod::AlibiOffset, false});
  rows.push_back({encoder("onesided"), "xtrap-fused-onesided", 8, 2048, false, PositionMethod::AlibiOneSided, false});
  // Every open pair, as causal-B8-L2048's dense row: one-sided heads against causal ones on the same
  // work, where with pairs skipped their slopes (each direction's 8 heads take the 8-head set) leave
  // about 3% more pairs to compute.
  rows.push_back(
      {encoder("onesided"), "xtrap-fused-onesided-dense", 8, 2048, false, PositionMethod::AlibiOneSided, false, true});
  // Learned slopes and first-token bias, both with gradients.
  rows.push_back({encoder("bialibi"), "xtrap-fused-bialibi", 8, 2048, false, PositionMethod::BiAlibi, false});
  return rows;
}

struct FusedResult {
  double ms = 0, forwardMs = 0, peakMiB = 0;
  std::string status = "ok";
};

// Median milliseconds of `reps` runs of `work` after `warmup`, by CUDA events on the current stream.
double medianMs(const std::function<void()>& work, int warmup, int reps) {
  for (int i = 0; i < warmup; ++i) work();
  torch::cuda::synchronize();
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream().stream();
  std::vector<cudaEvent_t> starts(reps), stops(reps);
  for (int i = 0; i < reps; ++i) {
    cudaEventCreate(&starts[i]);
    cudaEventCreate(&stops[i]);
    cudaEventRecord(starts[i], stream);
    work();
    cudaEventRecord(stops[i], stream);
  }
  torch::cuda::synchronize();
  std::vector<float> ms(reps);
  for (int i = 0; i < reps; ++i) {
    cudaEventElapsedTime(&ms[i], starts[i], stops[i]);
    cudaEventDestroy(starts[i]);
    cudaEventDestroy(stops[i]);
  }
  std::sort(ms.begin(), ms.end());
  return reps % 2 ? ms[reps / 2] : 0.5 * (ms[reps / 2 - 1] + ms[reps / 2]);
}

// How the kernel is run: its backward scheme and its tile products; the methods of its rows end in
// `suffix` (bench/attention_anchors.py --join reads them).
struct FusedConfig {
  const char* name;  // --fused-backward's
  cuda::BackwardScheme backward;
  cuda::TileProducts products;
  const char* suffix;
};
constexpr FusedConfig kFusedConfigs[] = {
    {"two-pass", cuda::BackwardScheme::TwoPass, cuda::TileProducts::WarpMma, ""},
    {"atomic", cuda::BackwardScheme::AtomicDq, cuda::TileProducts::WarpMma, "-atomic"},
    {"wgmma", cuda::BackwardScheme::TwoPass, cuda::TileProducts::WarpgroupMma, "-wgmma"},
    {"atomic-wgmma", cuda::BackwardScheme::AtomicDq, cuda::TileProducts::WarpgroupMma, "-atomic-wgmma"},
};

FusedResult timeFused(const FusedRow& r, const FusedConfig& config, int warmup, int reps) {
  FusedResult result;
  const int64_t H = kFusedHeads, D = kFusedHeadDim;
  try {
    LinearBiasSpec spec = makeLinearBiasSpec(r.pos, H, r.causal);
    if (r.learned) spec.learnedSlopes = true;
    auto bias = std::make_shared<LinearBias>(spec, /*learnedInitRandom=*/false);
    bias->to(torch::Device(torch::kCUDA));
    auto bf16 = torch::TensorOptions().device(torch::kCUDA).dtype(torch::kBFloat16);
    auto q = torch::randn({r.B, H, r.L, D}, bf16).requires_grad_(),
         k = torch::randn({r.B, H, r.L, D}, bf16).requires_grad_(),
         v = torch::randn({r.B, H, r.L, D}, bf16).requires_grad_(), dO = torch::randn({r.B, H, r.L, D}, bf16);
    std::string reason = fusedLinearBiasAttentionUnsupported(q, k, v, 0.0);
    if (reason.empty())
      if (const char* products = cuda::linearBiasAttentionProductsCheck(q.get_device(), config.products))
        reason = products;
    if (!reason.empty()) {
      result.status = "unsupported: " + reason;
      return result;
    }
    std::vector<torch::Tensor> inputs = {q, k, v};
    for (const auto& p : bias->parameters()) inputs.push_back(p);
    const double scale = 1.0 / std::sqrt(double(D));
    auto step = [&] {
      auto o =
          fusedLinearBiasAttention(q, k, v, *bias, r.causal, scale, 0.0, config.backward, !r.dense, config.products);
      torch::autograd::grad({o}, inputs, {dO}, /*retain_graph=*/{}, /*create_graph=*/false, /*allow_unused=*/true);
    };
    resetPeakMemory(q.device());
    result.ms = medianMs(step, warmup, reps);
    result.peakMiB = peakMemoryMiB(q.device());
    // The forward alone (no graph kept): with the total, the backward's share of the time.
    result.forwardMs = medianMs(
        [&] {
          torch::NoGradGuard noGrad;
          fusedLinearBiasAttention(q, k, v, *bias, r.causal, scale, 0.0, config.backward, !r.dense, config.products);
        },
        warmup, reps);
  } catch (const std::exception& e) {
    std::string what = e.what();
    what = what.substr(0, std::min(what.find('\n'), size_t(160)));
    result.status = what.find("out of memory") != std::string::npos ? "oom" : "error: " + what;
  }
  c10::cuda::CUDACachingAllocator::emptyCache();
  return result;
}

// What the compiler and the occupancy calculator say of each fused kernel on this GPU: the part of
// a profile that needs no profiler (bench/gpu_check.sh's ncu stage has the rest).
void printKernelFacts() {
  for (int D : {64, 128}) {
    cuda::KernelFacts facts[cuda::kKernelFactsCount];
    if (cudaError_t e = cuda::linearBiasAttentionKernelFacts(D, facts); e != cudaSuccess) {
      std::printf("# kernel facts D=%d: %s\n", D, cudaGetErrorString(e));
      continue;
    }
    for (const auto& f : facts)
      std::printf("# kernel D=%d %-16s registers/thread %3d, shared memory/block %6zu B, resident blocks/SM %d\n", D,
                  f.name, f.registers, f.sharedBytes, f.blocksPerSm);
  }
}

// `cases`: comma-separated case names, or empty for every case; `backward`: a FusedConfig's name or all.
int writeFusedCsv(const std::string& path, int reps, const std::string& cases, const std::string& backward) {
  if (backward != "all" && std::none_of(std::begin(kFusedConfigs), std::end(kFusedConfigs),
                                        [&](const FusedConfig& c) { return backward == c.name; })) {
    std::string names;
    for (const FusedConfig& c : kFusedConfigs) names += std::string(c.name) + ", ";
    std::fprintf(stderr, "bench_attention: --fused-backward must be %sor all, not '%s'\n", names.c_str(),
                 backward.c_str());
    return 2;
  }
  std::set<std::string> known, wanted;
  for (const FusedRow& r : fusedRows()) known.insert(r.caseName);
  std::istringstream names(cases);
  for (std::string name; std::getline(names, name, ',');) {
    if (!known.count(name)) {
      std::string all;
      for (const auto& k : known) all += (all.empty() ? "" : ",") + k;
      std::fprintf(stderr, "bench_attention: no fused case '%s' (cases: %s)\n", name.c_str(), all.c_str());
      return 2;
    }
    wanted.insert(name);
  }
  FILE* out = std::fopen(path.c_str(), "w");
  if (!out) {
    std::fprintf(stderr, "bench_attention: cannot write %s\n", path.c_str());
    return 1;
  }
  printKernelFacts();
  // attention_anchors.py's columns, then the forward alone (the join reads columns by name).
  const char* header = "case,B,H,L,D,causal,method,ms,tflops,peak_mib,status,fwd_ms\n";
  std::fputs(header, out);
  std::fputs(header, stdout);
  // Every row of one configuration, then of the next: the warpgroup MMA's products come last, so
  // that a CUDA error of theirs (which would poison every later call) loses no other row.
  for (const FusedConfig& config : kFusedConfigs)
    for (const FusedRow& r : fusedRows()) {
      if (!wanted.empty() && !wanted.count(r.caseName)) continue;
      if (backward != "all" && backward != config.name) continue;
      FusedResult t = timeFused(r, config, 5, reps);
      std::replace(t.status.begin(), t.status.end(), ',', ';');  // one CSV field
      bool half = r.causal || r.pos == PositionMethod::AlibiOneSided;
      double flops = 3.5 * 4.0 * double(r.B * kFusedHeads * r.L) * double(r.L * kFusedHeadDim) * (half ? 0.5 : 1.0);
      char numbers[128] = "";
      if (t.status == "ok")
        std::snprintf(numbers, sizeof numbers, "%.4f,%.2f,%.1f", t.ms, flops / (t.ms * 1e-3) / 1e12, t.peakMiB);
      else
        std::snprintf(numbers, sizeof numbers, ",,");
      char forward[32] = "";
      if (t.status == "ok") std::snprintf(forward, sizeof forward, "%.4f", t.forwardMs);
      for (FILE* f : {out, stdout})
        std::fprintf(f, "%s,%lld,%lld,%lld,%lld,%d,%s,%s,%s,%s\n", r.caseName.c_str(), (long long)r.B,
                     (long long)kFusedHeads, (long long)r.L, (long long)kFusedHeadDim, int(r.causal),
                     (r.method + config.suffix).c_str(), numbers, t.status.c_str(), forward);
      std::fflush(out);
    }
  std::fclose(out);
  return 0;
}

}  // namespace
#endif  // XTRAP_WITH_CUDA_KERNELS
}  // namespace xtrap

int main(int argc, char** argv) {
  const char* threads = std::getenv("XTRAP_THREADS");
  xtrap::configureRuntime(threads ? std::atoll(threads) : 2);
#ifdef XTRAP_WITH_CUDA_KERNELS
  std::string fusedCsv, fusedCases, fusedBackward = "all";
  int fusedReps = 20;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], "--fused-csv") == 0) fusedCsv = argv[i + 1];
    if (std::strcmp(argv[i], "--fused-reps") == 0) fusedReps = std::max(1, std::atoi(argv[i + 1]));
    if (std::strcmp(argv[i], "--fused-cases") == 0) fusedCases = argv[i + 1];
    if (std::strcmp(argv[i], "--fused-backward") == 0) fusedBackward = argv[i + 1];
  }
  if (!fusedCsv.empty()) return xtrap::writeFusedCsv(fusedCsv, fusedReps, fusedCases, fusedBackward);
#endif
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
