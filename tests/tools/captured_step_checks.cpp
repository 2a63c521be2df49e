// GPU test (ctest label gpu): the training step captured as a CUDA graph (train/device_step.h,
// --cuda-graph auto) against the same step run op by op (--cuda-graph uncaptured) and against the
// host-read step (--cuda-graph off): 50 steps of a tiny decoder in bf16 on CUDA, with dropout, the
// same losses to bf16 tolerance (among them ALiBi at head dimension 64, whose attention, dropout
// included, runs in the fused kernel where the build has it: a mask replayed unchanged would part
// the captured losses from the others; and ALiBi with 2 micro-batches a step, --accumulate 2); a
// captured run stopped at step 26 and resumed (its first steps
// after the resume eager, then captured anew) logs the uninterrupted run's losses; a one-rank
// torchrun job on NCCL captures its step with the all-reduce inside the graph and outside it
// (--graph-allreduce), both with the uncaptured data-parallel step's losses; a NaN injected
// into a replay is skipped on the device; where the step cannot be captured (an encoder) the run
// says so and trains with the host-read step. Prints each run's tokens per second (information,
// not a check). Without CUDA it reports itself skipped (exit 77).
#include <torch/torch.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "../error_of.h"
#include "../one_rank_job.h"
#include "../test_support.h"
#include "check_report.h"

using namespace xtrap;
using checks::check;
using checks::fmtDouble;

namespace {

constexpr int64_t kSteps = 50;

void onCudaBf16(TrainConfig& t) {
  t.device = "cuda";
  t.dtype = "bfloat16";
  t.lr = 1e-2;
  t.warmupSteps = 5;
  t.evalTokens = 2048;
}

ModelConfig withDropout(const std::string& pos) {
  ModelConfig c = test::tinyConfig(pos);
  c.dropout = 0.1;
  return c;
}

// ALiBi with 2 heads of dimension 64 and attention dropout, which the fused attention kernel takes
// (where this build has it: the check says which path ran).
ModelConfig fusedAttentionConfig() {
  ModelConfig c = withDropout("alibi");
  c.dModel = 128, c.heads = 2, c.ffn = 256, c.contextLength = 64;
#ifdef XTRAP_WITH_CUDA_KERNELS
  Transformer model(c);
  model->place({torch::Device(torch::kCUDA), torch::kBFloat16});
  model->train();
  check(model->attentionPath(c.contextLength, {}) == AttentionPath::FusedLinearBias,
        "ALiBi at head dimension 64 with attention dropout, training in bf16, takes the fused attention kernel");
#else
  std::puts("note  this build has no fused kernels: alibi-d64's attention runs unfused");
#endif
  return c;
}

RunInfo train(const std::string& name, const ModelConfig& c, const std::string& cudaGraph,
              const test::TrainSetup& more = {}, std::set<int64_t> nanAt = {},
              const std::string& graphAllreduce = "outside") {
  return test::trainTiny(
      "captured-" + name, c, kSteps, 1,
      [&](TrainConfig& t) {
        onCudaBf16(t);
        if (more) more(t);
      },
      [&](TrainRequest& r) {
        r.cudaGraph = cudaGraph;
        r.injectNanAtSteps = nanAt;
        r.graphAllreduce = graphAllreduce;
      });
}

void capturedMatchesUncaptured(const std::string& pos, ModelConfig c, const test::TrainSetup& more = {}) {
  RunInfo captured = train(pos + "-auto", c, "auto", more);
  RunInfo uncaptured = train(pos + "-uncaptured", c, "uncaptured", more);
  RunInfo host = train(pos + "-off", c, "off", more);
  check(captured.extra["train_step"] == "captured",
        pos + ": --cuda-graph auto captured the step (train_step " + captured.extra["train_step"].dump() + ")");
  auto a = test::loggedLosses(captured), b = test::loggedLosses(uncaptured), h = test::loggedLosses(host);
  double vsUncaptured = test::worstRelative(a, b), vsHost = test::worstRelative(a, h);
  check(a.size() == size_t(kSteps) && vsUncaptured <= 1e-2,
        pos + ": captured vs uncaptured, " + std::to_string(a.size()) + " steps: worst relative loss difference " +
            fmtDouble(vsUncaptured) + " (bf16 tolerance 1e-2)");
  check(vsHost <= 1e-2, pos + ": captured vs the host-read step: worst relative loss difference " + fmtDouble(vsHost) +
                            " (bf16 tolerance 1e-2)");
  std::printf("info  %s: tok/s captured %.0f, uncaptured %.0f, host-read %.0f (tiny model: launch-bound)\n",
              pos.c_str(), captured.extra.value("tok_per_s", 0.0), uncaptured.extra.value("tok_per_s", 0.0),
              host.extra.value("tok_per_s", 0.0));
}

// An uninterrupted captured run against one stopped after step 26 (a NaN there, --max-bad-steps
// 1, the checkpoint of step 25 kept) and resumed.
void resumeIsExact() {
  ModelConfig c = withDropout("rotary");
  auto every25 = [](TrainConfig& t) { t.checkpointEvery = 25; };
  RunInfo whole = train("whole", c, "auto", every25);
  std::string stopped = test::errorOf([&] {
    train("parted", c, "auto",
          [](TrainConfig& t) {
            t.checkpointEvery = 25;
            t.maxBadSteps = 1;
          },
          {26});
  });
  check(stopped.find("(step 25)") != std::string::npos,
        "a NaN injected into a replay is skipped and stops the run at --max-bad-steps 1: " + stopped);
  TrainRequest resume;
  resume.resume = true;
  resume.runDir = std::filesystem::temp_directory_path() / "xtrap-test-run-captured-parted";
  resume.progress = false;
  RunInfo parted = trainRun(resume);
  auto a = test::loggedLosses(whole), b = test::loggedLosses(parted);
  bool equal = a == b;
  double worst = test::worstRelative(a, b);
  // Same GPU, kernels, data order and generator states; only CUDA's atomic adds (the embedding's
  // backward) may reorder a sum.
  check(parted.extra["train_step"] == "captured" && (equal || worst <= 1e-4),
        std::string("captured run resumed at step 25 vs uninterrupted: ") +
            (equal ? "identical losses" : "worst relative loss difference " + fmtDouble(worst) + " (tolerance 1e-4)"));
}

// A torchrun job of one rank on NCCL: the gradients and loss all-reduced as one buffer inside the
// step's graph and between its two graphs, against the same job's uncaptured step.
void dataParallelCaptured() {
#ifndef XTRAP_WITH_NCCL
  std::puts("skip  data-parallel capture: this LibTorch has no NCCL");
#else
  test::OneRankEnvironment job;
  ModelConfig c = withDropout("alibi");
  RunInfo uncaptured = train("dp-uncaptured", c, "uncaptured");
  auto reference = test::loggedLosses(uncaptured);
  for (std::string where : {"inside", "outside"}) {
    RunInfo captured = train("dp-" + where, c, "auto", {}, {}, where);
    const double worst = test::worstRelative(test::loggedLosses(captured), reference);
    check(captured.extra["train_step"] == "captured" && captured.extra["allreduce_buckets"] == 1 && worst <= 1e-2,
          "one-rank NCCL job, all-reduce " + where + " the graph: train_step " + captured.extra["train_step"].dump() +
              ", worst relative loss difference to the uncaptured step " + fmtDouble(worst) + " (bf16 tolerance 1e-2)");
    std::printf("info  data parallel, all-reduce %s: tok/s captured %.0f, uncaptured %.0f\n", where.c_str(),
                captured.extra.value("tok_per_s", 0.0), uncaptured.extra.value("tok_per_s", 0.0));
  }
#endif
}

void encoderFallsBack() {
  RunInfo run = test::trainTiny("captured-encoder", test::tinyConfig("alibi", "encoder"), 3, 1, onCudaBf16,
                                [](TrainRequest& r) { r.cudaGraph = "auto"; });
  check(run.extra["train_step"] == "host", "an encoder with --cuda-graph auto trains with the host-read step");
}

}  // namespace

int main() {
  if (const int status = checks::skipStatus(/*needsKernels=*/false)) return status;
  return checks::runChecks("captured_step_checks", [] {
    for (std::string pos : {"alibi", "rotary", "none"}) capturedMatchesUncaptured(pos, withDropout(pos));
    capturedMatchesUncaptured("alibi-d64", fusedAttentionConfig());
    capturedMatchesUncaptured("alibi-accumulate2", withDropout("alibi"), [](TrainConfig& t) { t.accumulate = 2; });
    resumeIsExact();
    dataParallelCaptured();
    encoderFallsBack();
  });
}
