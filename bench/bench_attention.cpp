// Google Benchmark micro-benchmarks of xtrap's hot spots (issue 7):
//  - one attention layer, forward and forward + backward, for every position method, at
//    L = 512 and 2048, on the full-matrix and the query-block paths;
//  - the loss head, full tied softmax vs adaptive softmax;
//  - training-batch assembly (sampler + gather);
//  - a square sgemm, the machine's matmul peak that MFU is measured against.
// Items processed are tokens (attention, batching) or rows (head), so the reports read as
// tokens/s. Sizes are the quickstart model's (d = 128, 8 heads); 2048 tokens per iteration.
// Threads: --threads is not a Google Benchmark flag; set XTRAP_THREADS (default 2).
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <numeric>
#include <optional>

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
}  // namespace xtrap

int main(int argc, char** argv) {
  const char* threads = std::getenv("XTRAP_THREADS");
  xtrap::configureRuntime(threads ? std::atoll(threads) : 2);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
