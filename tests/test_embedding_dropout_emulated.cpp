// The embedding's scale, position add and dropout (embedding_dropout.cu) run on the CPU through
// tests/cuda_emulation. Checked against embedding_dropout.cuh's contract written out again here,
// with the mask of dropout_reference.h, bit for bit (each product and sum one float32 rounding):
//   out = (e * scale + pos[t]) * factor,  dE = dOut * factor * scale,  dPos[t] = sum_b dOut * factor
// (dPos's sum over b in order). C a multiple of 8 and not, with and without positions, dropout 0
// and 0.25, the same bits under both thread schedules.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "cuda_emulation.h"
#include "device_buffer.h"
#include "dropout_reference.h"
#include "model/embedding_dropout.cuh"

using cuda_emulation::Buffer;

namespace {

constexpr uint64_t kSeed = 31337, kOffset = 4;

struct Shape {
  int64_t B, T, C;
  bool positions;
  float scale;
  double p;
};

void checkCase(const Shape& s) {
  INFO("B " << s.B << " T " << s.T << " C " << s.C << " positions " << s.positions << " p " << s.p);
  const size_t n = size_t(s.B * s.T * s.C), table = size_t(s.T * s.C);
  Buffer<float> e(n), pos(table), out(n), dOut(n), dE(n), dPos(table);
  Buffer<int64_t> resolved(2);
  std::mt19937 gen{uint32_t(n)};
  std::normal_distribution<float> normal(0.f, 1.f);
  for (size_t i = 0; i < n; ++i) e[i] = normal(gen), dOut[i] = normal(gen);
  for (size_t i = 0; i < table; ++i) pos[i] = normal(gen);
  xtrap::cuda::EmbeddingDropoutArgs a;
  a.batch = s.B, a.length = s.T, a.cols = s.C, a.scale = s.scale;
  a.positions = s.positions ? pos.data() : nullptr;
  a.dropout.threshold = s.p > 0 ? uint32_t(s.p * 4294967296.0) : 0;
  a.dropout.scale = float(1.0 / (1.0 - s.p));
  a.dropout.rng.seed = kSeed, a.dropout.rng.offset = kOffset, a.dropout.resolved = resolved.data();
  a.embedding = e.data(), a.out = out.data(), a.dOut = dOut.data(), a.dEmbedding = dE.data();
  a.dPositions = s.positions ? dPos.data() : nullptr;
  REQUIRE(xtrap::cuda::embeddingDropoutForward(a, nullptr) == cudaSuccess);
  a.dropout.rng = {};
  a.dropout.rng.captured = true, a.dropout.rng.seedPtr = resolved.data(), a.dropout.rng.offsetPtr = resolved.data() + 1;
  a.dropout.resolved = nullptr;
  if (s.p == 0) a.dropout.rng.seedPtr = a.dropout.rng.offsetPtr = nullptr;  // p = 0 reads no state
  REQUIRE(xtrap::cuda::embeddingDropoutBackward(a, nullptr) == cudaSuccess);
  const uint64_t key = dropout_reference::key(kSeed, kOffset);
  int bad = 0, dropped = 0;
  std::vector<float> wantPos(table, 0.f);
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t t = 0; t < s.T; ++t)
      for (int64_t c = 0; c < s.C; ++c) {
        const size_t i = size_t((b * s.T + t) * s.C + c), j = size_t(t * s.C + c);
        const float f = dropout_reference::factor(key, i, s.p);
        dropped += f == 0.f;
        volatile float v = e[i] * s.scale;
        v = v + (s.positions ? pos[j] : 0.f);
        v = v * f;
        volatile float g = dOut[i] * f;
        wantPos[j] = wantPos[j] + g;
        volatile float dEmb = g * s.scale;
        bad += out[i] != v || dE[i] != dEmb;
      }
  CHECK(bad == 0);
  if (s.positions)
    for (size_t j = 0; j < table; ++j) CHECK(dPos[j] == wantPos[j]);
  if (s.p == 0) CHECK(dropped == 0);
  if (s.p > 0) CHECK(std::abs(double(dropped) / double(n) - s.p) < 0.05);
  for (const Buffer<float>* buf : {&out, &dE, &dPos}) CHECK(buf->guardIntact());
}

}  // namespace

TEST_CASE("embedding scale + positions + dropout's CUDA kernels (CPU emulation): bit for bit", "[cuda_emulation]") {
  checkCase({3, 17, 64, true, 8.f, 0.0});          // 16-byte chunks, positions, the scale sqrt(64)
  checkCase({2, 40, 72, true, 1.f, 0.25});         // dropout; 9 chunks a row
  checkCase({4, 9, 13, false, 3.6055512f, 0.25});  // C not a multiple of 8, no positions
  checkCase({1, 300, 16, true, 4.f, 0.1});         // more than one block of threads
}

TEST_CASE("embedding scale + positions + dropout's CUDA kernels (CPU emulation): the same bits under both schedules",
          "[cuda_emulation]") {
  auto run = [](cuda_emulation::Schedule schedule) {
    cuda_emulation::setSchedule(schedule);
    Buffer<float> e(2 * 50 * 24), out(2 * 50 * 24);
    for (size_t i = 0; i < 2 * 50 * 24; ++i) e[i] = float(i % 13) - 6.f;
    xtrap::cuda::EmbeddingDropoutArgs a;
    a.batch = 2, a.length = 50, a.cols = 24, a.scale = 2.f, a.embedding = e.data(), a.out = out.data();
    a.dropout.threshold = 1u << 31, a.dropout.scale = 2.f;
    REQUIRE(xtrap::cuda::embeddingDropoutForward(a, nullptr) == cudaSuccess);
    cuda_emulation::setSchedule(cuda_emulation::Schedule::Ascending);
    return std::vector<float>(out.data(), out.data() + 2 * 50 * 24);
  };
  CHECK(run(cuda_emulation::Schedule::Ascending) == run(cuda_emulation::Schedule::Descending));
}
