// The attention plan as a table: for each forward that matters (device, window length, training
// with dropout, probing, causal or not, a requested query block) and each build (LibTorch 1.13:
// no SDPA; 2.1-2.2: SDPA with an unfused CPU kernel; 2.3+: a fused CPU kernel), the path written
// down by hand from the rules of issue 21: a requested query block is a memory bound only the
// block path keeps; probes need xtrap's own probabilities; SDPA on the GPU always, on the CPU only
// when fused and without dropout; on the CPU training recomputes its probabilities in the backward
// pass (rows with dropout are training rows) and a long causal window skips its masked blocks. The
// kind matters in one place: without a bias SDPA needs no T x T mask, so a memory bound does not
// rule it out (second table). Block sizes are worked by hand.
#include <catch2/catch.hpp>
#include <sstream>

#include "model/attention_plan.h"

using namespace xtrap;

namespace {

enum class Build { Torch113, Torch21, Torch23 };  // no SDPA | SDPA, unfused CPU | SDPA, fused CPU

struct Row {
  Build build;
  bool cuda;
  bool causal;
  int64_t T;
  int64_t queryBlock;
  bool dropout;
  bool probing;
  AttentionPath expected;
  bool training = false;  // a backward pass follows (always so with dropout)
};

std::string describe(const Row& r) {
  std::ostringstream s;
  s << (r.build == Build::Torch113  ? "1.13"
        : r.build == Build::Torch21 ? "2.1"
                                    : "2.3")
    << (r.cuda ? " cuda" : " cpu") << (r.causal ? " causal" : " bidirectional") << " T=" << r.T
    << " queryBlock=" << r.queryBlock << (r.dropout ? " dropout" : "") << (r.probing ? " probing" : "") << " -> "
    << attentionPathName(r.expected);
  return s.str();
}

AttentionPlanInput inputOf(const Row& r, BiasKind bias) {
  AttentionPlanInput in;
  in.cuda = r.cuda;
  in.length = r.T;
  in.queryBlock = r.queryBlock;
  in.dropout = r.dropout;
  in.backward = r.dropout || r.training;
  in.probing = r.probing;
  in.causal = r.causal;
  in.bias = bias;
  in.hasSdpa = r.build != Build::Torch113;
  in.hasFusedCpuSdpa = r.build == Build::Torch23;
  return in;
}

constexpr auto Ref = AttentionPath::Reference;
constexpr auto Skip = AttentionPath::CausalSkip;
constexpr auto Blk = AttentionPath::Block;
constexpr auto Sdpa = AttentionPath::Sdpa;
constexpr auto Rec = AttentionPath::Recompute;
constexpr bool cpu = false, cuda = true, dec = true, enc = false, drop = true, probe = true;

// clang-format off
const Row kTable[] = {
  // LibTorch 1.13 on the CPU (Debian's: CI and the CPU machines).
  {Build::Torch113, cpu, dec,    16,   0, false, false, Ref},   // short: one piece
  {Build::Torch113, cpu, dec,   255,   0, false, false, Ref},   // below 8 blocks of 32 rows
  {Build::Torch113, cpu, dec,   256,   0, false, false, Skip},  // 8 blocks of 32 rows
  {Build::Torch113, cpu, dec,  4096,   0, false, false, Skip},
  {Build::Torch113, cpu, dec,  4096,   0, drop,  false, Rec},   // training: the probabilities recomputed
  {Build::Torch113, cpu, dec,  4096,   0, false, probe, Ref},   // probes read the whole probabilities
  {Build::Torch113, cpu, dec,  4096, 256, false, false, Blk},   // a memory bound asked for
  {Build::Torch113, cpu, dec,  4096, 256, false, probe, Blk},   // probes stream blocks of rows
  {Build::Torch113, cpu, dec,  4096, 256, drop,  false, Blk},
  {Build::Torch113, cpu, dec,   512, 512, false, false, Skip},  // a block as long as T is no block
  {Build::Torch113, cpu, dec,   512, 600, false, false, Skip},  // nor one longer than T
  {Build::Torch113, cpu, dec,    16, 256, false, false, Ref},   // evaluation's default block, short window
  {Build::Torch113, cpu, dec,    21,   5, false, false, Blk},
  {Build::Torch113, cpu, enc,    16,   0, false, false, Ref},
  {Build::Torch113, cpu, enc,  4096,   0, false, false, Ref},   // nothing to skip without a mask
  {Build::Torch113, cpu, enc,  4096,   0, drop,  false, Rec},
  {Build::Torch113, cpu, enc,  4096, 256, false, false, Blk},
  {Build::Torch113, cpu, enc,  4096,   0, false, probe, Ref},
  // LibTorch 2.1-2.2 on the CPU: SDPA exists but is the unfused math xtrap's paths beat.
  {Build::Torch21,  cpu, dec,    16,   0, false, false, Ref},
  {Build::Torch21,  cpu, dec,  4096,   0, false, false, Skip},
  {Build::Torch21,  cpu, dec,  4096,   0, drop,  false, Rec},
  {Build::Torch21,  cpu, enc,  4096,   0, false, false, Ref},
  {Build::Torch21,  cpu, dec,  4096, 256, false, false, Blk},
  // LibTorch 2.3+ on the CPU: the fused kernel serves inference (it has no dropout).
  {Build::Torch23,  cpu, dec,    16,   0, false, false, Sdpa},
  {Build::Torch23,  cpu, dec,  4096,   0, false, false, Sdpa},
  {Build::Torch23,  cpu, enc,  4096,   0, false, false, Sdpa},
  {Build::Torch23,  cpu, dec,  4096,   0, drop,  false, Rec},   // training with dropout: xtrap's paths
  {Build::Torch23,  cpu, dec,    16,   0, drop,  false, Rec},
  {Build::Torch23,  cpu, enc,  4096,   0, drop,  false, Rec},
  {Build::Torch23,  cpu, dec,  4096,   0, false, probe, Ref},
  {Build::Torch23,  cpu, enc,  4096, 256, false, false, Blk},
  {Build::Torch23,  cpu, dec,  4096, 256, false, probe, Blk},
  // CUDA with SDPA (the PyTorch wheel's LibTorch): SDPA for training and inference alike.
  {Build::Torch21,  cuda, dec,   16,   0, false, false, Sdpa},
  {Build::Torch21,  cuda, dec, 4096,   0, drop,  false, Sdpa},
  {Build::Torch23,  cuda, dec, 4096,   0, false, false, Sdpa},
  {Build::Torch23,  cuda, enc, 4096,   0, drop,  false, Sdpa},
  {Build::Torch23,  cuda, enc,  512,   0, false, false, Sdpa},
  {Build::Torch23,  cuda, dec, 4096,   0, false, probe, Ref},   // probes: xtrap's probabilities
  {Build::Torch23,  cuda, dec, 4096, 256, false, false, Blk},   // the memory bound still holds
  {Build::Torch23,  cuda, enc, 4096, 256, false, probe, Blk},
  // CUDA without SDPA: the reference path (skipping blocks is a CPU path).
  {Build::Torch113, cuda, dec, 4096,   0, false, false, Ref},
  {Build::Torch113, cuda, dec, 4096,   0, drop,  false, Ref},
  {Build::Torch113, cuda, enc, 4096,   0, false, false, Ref},
  {Build::Torch113, cuda, dec, 4096, 256, false, false, Blk},
  // Training without dropout: recomputed on the CPU unless the fused CPU kernel takes it.
  {Build::Torch113, cpu, dec,    16,   0, false, false, Rec, true},
  {Build::Torch113, cpu, dec,  4096,   0, false, false, Rec, true},
  {Build::Torch113, cpu, enc,  4096,   0, false, false, Rec, true},
  {Build::Torch113, cpu, dec,  4096,   0, false, probe, Ref, true},  // probes first
  {Build::Torch113, cpu, dec,  4096, 256, false, false, Blk, true},  // a memory bound asked for
  {Build::Torch21,  cpu, dec,  4096,   0, false, false, Rec, true},
  {Build::Torch23,  cpu, dec,  4096,   0, false, false, Sdpa, true},
  {Build::Torch113, cuda, dec, 4096,   0, false, false, Ref, true},  // recomputing is a CPU path
  {Build::Torch23,  cuda, dec, 4096,   0, false, false, Sdpa, true},
};

// No bias provider (none, sinusoidal, learned, rotary): the rows above whose path differs, plus
// a few that do not. SDPA without a mask (flash-style kernels) keeps a requested memory bound.
const Row kTableWithoutBias[] = {
  {Build::Torch23,  cpu, dec,  4096, 256, false, false, Sdpa},  // fused CPU kernel, inference
  {Build::Torch23,  cpu, enc,  4096, 256, false, false, Sdpa},
  {Build::Torch23,  cpu, dec,  4096, 256, drop,  false, Blk},   // dropout: not the fused CPU kernel
  {Build::Torch23,  cpu, dec,  4096, 256, false, probe, Blk},   // probes still need probabilities
  {Build::Torch21,  cpu, dec,  4096, 256, false, false, Blk},   // unfused CPU SDPA: no
  {Build::Torch113, cpu, dec,  4096, 256, false, false, Blk},
  {Build::Torch21,  cuda, dec, 4096, 256, drop,  false, Sdpa},
  {Build::Torch23,  cuda, dec, 4096, 256, false, false, Sdpa},
  {Build::Torch23,  cuda, enc, 4096, 256, false, probe, Blk},
  {Build::Torch113, cuda, dec, 4096, 256, false, false, Blk},
  {Build::Torch113, cpu, dec,  4096,   0, false, false, Skip},  // no block asked: as with a bias
  {Build::Torch23,  cuda, dec, 4096,   0, drop,  false, Sdpa},
};
// clang-format on

}  // namespace

TEST_CASE("chooseAttentionPath: the table of forwards and builds, for both bias kinds", "[attention-plan]") {
  for (const Row& row : kTable)
    for (BiasKind bias : {BiasKind::Linear, BiasKind::Table}) {
      INFO(describe(row) << " bias kind " << int(bias));
      CHECK(chooseAttentionPath(inputOf(row, bias)) == row.expected);
    }
}

TEST_CASE("chooseAttentionPath: without a bias, SDPA keeps a requested memory bound", "[attention-plan]") {
  for (const Row& row : kTableWithoutBias) {
    INFO(describe(row));
    CHECK(chooseAttentionPath(inputOf(row, BiasKind::None)) == row.expected);
  }
  // Every row of the main table without a query block takes the same path without a bias.
  for (const Row& row : kTable)
    if (row.queryBlock == 0 || row.queryBlock >= row.T) {
      INFO(describe(row));
      CHECK(chooseAttentionPath(inputOf(row, BiasKind::None)) == row.expected);
    }
}

TEST_CASE("chooseAttentionPath: with a bias, a query block shorter than T is always the block path",
          "[attention-plan]") {
  for (Build build : {Build::Torch113, Build::Torch21, Build::Torch23})
    for (bool onCuda : {false, true})
      for (bool causal : {false, true})
        for (bool dropout : {false, true})
          for (bool probing : {false, true})
            for (int64_t T : {2, 33, 300, 70000}) {
              Row row{build, onCuda, causal, T, T - 1, dropout, probing, Blk};
              INFO(describe(row));
              CHECK(chooseAttentionPath(inputOf(row, BiasKind::Linear)) == Blk);
            }
}

// bfloat16 compute with a bias: SDPA would take the bias as a mask in the query's precision, so
// the plan takes the path it would take without SDPA (the LibTorch 1.13 rows of the same forward,
// which add the float32 bias to float32 logits). Without a bias the precision changes nothing.
TEST_CASE("chooseAttentionPath: a bias in bfloat16 compute never goes to SDPA", "[attention-plan]") {
  // clang-format off
  const Row rows[] = {
    {Build::Torch23,  cpu, dec,    16,   0, false, false, Ref},
    {Build::Torch23,  cpu, dec,  4096,   0, false, false, Skip},
    {Build::Torch23,  cpu, enc,  4096,   0, false, false, Ref},
    {Build::Torch23,  cpu, dec,  4096,   0, false, false, Rec, true},
    {Build::Torch23,  cpu, dec,  4096,   0, drop,  false, Rec},
    {Build::Torch21,  cuda, dec,   16,   0, false, false, Ref},
    {Build::Torch21,  cuda, dec, 4096,   0, drop,  false, Ref},
    {Build::Torch23,  cuda, enc, 4096,   0, drop,  false, Ref},
    {Build::Torch23,  cuda, dec, 4096,   0, false, false, Ref, true},
    {Build::Torch23,  cuda, dec, 4096, 256, false, false, Blk},
    {Build::Torch23,  cuda, dec, 4096,   0, false, probe, Ref},
  };
  // clang-format on
  for (const Row& row : rows)
    for (BiasKind bias : {BiasKind::Linear, BiasKind::Table}) {
      INFO(describe(row) << " bias kind " << int(bias));
      AttentionPlanInput in = inputOf(row, bias);
      in.reducedPrecision = true;
      CHECK(chooseAttentionPath(in) == row.expected);
    }
  for (const Row& row : kTable)
    for (BiasKind bias : {BiasKind::Linear, BiasKind::Table}) {
      INFO(describe(row) << " bias kind " << int(bias));
      AttentionPlanInput in = inputOf(row, bias);
      in.reducedPrecision = true;
      CHECK(chooseAttentionPath(in) != Sdpa);
    }
  for (const Row& row : kTableWithoutBias) {
    INFO(describe(row));
    AttentionPlanInput in = inputOf(row, BiasKind::None);
    in.reducedPrecision = true;
    CHECK(chooseAttentionPath(in) == row.expected);
  }
  // The fused kernel computes the ALiBi bias in float32 per tile: bf16 keeps it.
  AttentionPlanInput fused = inputOf({Build::Torch23, cuda, dec, 4096, 0, drop, false, Ref}, BiasKind::Linear);
  fused.reducedPrecision = true;
  fused.fusedLinearBias = true;
  CHECK(chooseAttentionPath(fused) == AttentionPath::FusedLinearBias);
}

TEST_CASE("attention path names and which paths read the full bias", "[attention-plan]") {
  CHECK(attentionPathName(Ref) == "reference");
  CHECK(attentionPathName(Skip) == "causal-skip");
  CHECK(attentionPathName(Blk) == "block");
  CHECK(attentionPathName(Sdpa) == "sdpa");
  CHECK(attentionPathName(Rec) == "recompute");
  CHECK(attentionPathName(AttentionPath::FusedLinearBias) == "fused-linear-bias");
  // The block and recompute paths compute each block's bias from the provider (training at
  // 4L..16L holds no (H, T, T) bias); SDPA takes causality as a flag and needs the full tensor
  // only for a bias; the others take the (H|1, T, T) bias, or the causal mask alone, prepared once
  // per forward.
  for (BiasKind bias : {BiasKind::Linear, BiasKind::Table}) {
    CHECK(pathUsesFullBias(Ref, bias));
    CHECK(pathUsesFullBias(Skip, bias));
    CHECK(pathUsesFullBias(Sdpa, bias));
    CHECK_FALSE(pathUsesFullBias(Rec, bias));
    CHECK_FALSE(pathUsesFullBias(Blk, bias));
    CHECK_FALSE(pathUsesFullBias(AttentionPath::FusedLinearBias, bias));  // the kernel computes it per tile
  }
  CHECK(pathUsesFullBias(Ref, BiasKind::None));
  CHECK(pathUsesFullBias(Skip, BiasKind::None));
  CHECK_FALSE(pathUsesFullBias(Rec, BiasKind::None));  // the causal mask from block indices
  CHECK_FALSE(pathUsesFullBias(Sdpa, BiasKind::None));
  CHECK_FALSE(pathUsesFullBias(Blk, BiasKind::None));
}

// A build with the fused CUDA kernel of the ALiBi family (linear_bias_attention.cuh), for a
// forward it takes: on CUDA every ALiBi-family forward uses it, training, evaluation, a requested
// memory bound (the kernel holds no T x T tensor) or not, except probes, which read xtrap's own
// probabilities. Other bias kinds, and the CPU, plan as without it.
TEST_CASE("chooseAttentionPath: the fused CUDA kernel takes the ALiBi family on the GPU", "[attention-plan]") {
  constexpr auto Fused = AttentionPath::FusedLinearBias;
  // clang-format off
  const Row rows[] = {
    {Build::Torch23,  cuda, dec, 4096,   0, false, false, Fused},
    {Build::Torch23,  cuda, dec,    1,   0, false, false, Fused},
    {Build::Torch23,  cuda, dec, 4096,   0, drop,  false, Fused},         // training with dropout
    {Build::Torch23,  cuda, dec,  512,   0, false, false, Fused, true},   // training without
    {Build::Torch23,  cuda, enc, 4096,   0, drop,  false, Fused},
    {Build::Torch23,  cuda, dec, 16384, 256, false, false, Fused},        // long evaluation's block request
    {Build::Torch23,  cuda, enc, 4096, 256, drop,  false, Fused},
    {Build::Torch113, cuda, dec, 4096,   0, false, false, Fused},         // no SDPA needed
    {Build::Torch23,  cuda, dec, 4096,   0, false, probe, Ref},           // probes: xtrap's probabilities
    {Build::Torch23,  cuda, enc, 4096, 256, false, probe, Blk},
    {Build::Torch23,  cpu,  dec, 4096,   0, false, false, Sdpa},          // a CUDA kernel: not on the CPU
    {Build::Torch113, cpu,  dec, 4096,   0, drop,  false, Rec},
    {Build::Torch113, cpu,  enc, 4096, 256, false, false, Blk},
  };
  // clang-format on
  for (const Row& row : rows) {
    INFO(describe(row));
    AttentionPlanInput in = inputOf(row, BiasKind::Linear);
    in.fusedLinearBias = true;
    CHECK(chooseAttentionPath(in) == row.expected);
  }
  // T5, KERPLE, FIRE and the methods without a bias: the kernel is for the ALiBi family only.
  for (const Row& row : kTable)
    for (BiasKind bias : {BiasKind::Table, BiasKind::None}) {
      INFO(describe(row) << " bias kind " << int(bias));
      AttentionPlanInput in = inputOf(row, bias);
      AttentionPath without = chooseAttentionPath(in);
      in.fusedLinearBias = true;
      CHECK(chooseAttentionPath(in) == without);
    }
}

TEST_CASE("attentionBlockRows: at most the requested rows, ~2^20 logits per head, at least 32", "[attention-plan]") {
  // min(queryBlock, max(32, floor(2^20 / T))), worked by hand.
  CHECK(attentionBlockRows(21, 5) == 5);        // 2^20 / 21 = 49932: the request binds
  CHECK(attentionBlockRows(1000, 256) == 256);  // 1048 rows would fit
  CHECK(attentionBlockRows(4096, 256) == 256);  // exactly 256
  CHECK(attentionBlockRows(4096, 512) == 256);  // 2^20 / 4096 = 256 < 512
  CHECK(attentionBlockRows(8192, 256) == 128);
  CHECK(attentionBlockRows(12000, 256) == 87);  // 1048576 / 12000 = 87.4
  CHECK(attentionBlockRows(16384, 256) == 64);
  CHECK(attentionBlockRows(32768, 256) == 32);
  CHECK(attentionBlockRows(65536, 256) == 32);  // 16 would fit; the floor of 32 rows holds
  CHECK(attentionBlockRows(1 << 20, 256) == 32);
  CHECK(attentionBlockRows(65536, 16) == 16);  // a smaller request still binds
  CHECK(attentionBlockRows(0, 64) == 64);      // no division by zero
}

TEST_CASE("causalSkipBlock: 8 blocks of at least 32 rows, else one piece", "[attention-plan]") {
  CHECK(causalSkipBlock(0) == 0);
  CHECK(causalSkipBlock(16) == 0);
  CHECK(causalSkipBlock(255) == 0);
  CHECK(causalSkipBlock(256) == 32);  // 8 x 32
  CHECK(causalSkipBlock(257) == 33);  // ceil(257 / 8): the last block is short
  CHECK(causalSkipBlock(260) == 33);  // 7 x 33 + 29
  CHECK(causalSkipBlock(512) == 64);
  CHECK(causalSkipBlock(1000) == 125);
  CHECK(causalSkipBlock(1001) == 126);
  CHECK(causalSkipBlock(4096) == 512);
  CHECK(causalSkipBlock(12000) == 1500);
}

TEST_CASE("recomputeBlockRows: ~2^21 logits over batch x heads, at least 32 rows, at most T", "[attention-plan]") {
  // min(T, max(32, floor(2^21 / (BH * T)))), worked by hand.
  CHECK(recomputeBlockRows(64, 512) == 64);    // 2097152 / 32768: the quickstart model's 8 x 8 heads
  CHECK(recomputeBlockRows(8, 512) == 512);    // 512 rows would fit exactly: the whole window
  CHECK(recomputeBlockRows(4, 512) == 512);    // 1024 would fit; no more than T
  CHECK(recomputeBlockRows(64, 4096) == 32);   // 8 would fit; the floor of 32 rows holds
  CHECK(recomputeBlockRows(16, 1000) == 131);  // 2097152 / 16000 = 131.07
  CHECK(recomputeBlockRows(1, 16) == 16);
  CHECK(recomputeBlockRows(1, 1) == 1);
}

TEST_CASE("chooseAttentionPath: grouped key/value heads or a soft-cap take xtrap's query-block paths only",
          "[attention-plan]") {
  // Only reference, causal-skip and block read k and v per group and soft-cap the logits
  // (attention.h): never SDPA, recompute or the fused kernel, on any device or build.
  for (bool grouped : {true, false})
    for (bool cuda : {false, true})
      for (bool training : {false, true}) {
        AttentionPlanInput in;
        in.cuda = cuda, in.length = 512, in.causal = true, in.backward = training;
        in.hasSdpa = in.hasFusedCpuSdpa = in.fusedLinearBias = true;
        in.bias = BiasKind::Linear;
        in.groupedKv = grouped, in.softcap = !grouped;
        CHECK(chooseAttentionPath(in) == AttentionPath::CausalSkip);
        in.causal = false;
        CHECK(chooseAttentionPath(in) == AttentionPath::Reference);
        in.queryBlock = 64;
        CHECK(chooseAttentionPath(in) == AttentionPath::Block);
      }
}
