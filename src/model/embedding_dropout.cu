// The embedding's scale, position add and dropout on CUDA (embedding_dropout.cuh).
//
// A thread takes 8 consecutive columns of one position t and walks the batch: each (b, t) row's
// chunk is one pair of 16-byte loads where the tensors are 16-byte aligned and C a multiple of 8
// (else one element at a time), and the position's chunk is read once for all b. The backward's
// position gradient is the walk's running sum, written once. Memory-bound by design.
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/element_chunks.cuh"
#include "cuda/launch_1d.cuh"
#include "model/counter_dropout.cuh"
#include "model/embedding_dropout.cuh"

namespace xtrap::cuda {
namespace {

constexpr int kThreads = 256;

// This thread's position t and columns [c0, c0 + n), n <= 8; false past the last.
struct Columns {
  int64_t t, c0;
  int n;
  bool whole;
};
__device__ __forceinline__ bool columnsOf(const EmbeddingDropoutArgs& a, bool vector, Columns& k) {
  const int64_t chunks = (a.cols + kChunk - 1) / kChunk;
  const int64_t x = int64_t(blockIdx.x) * kThreads + threadIdx.x;
  if (x >= a.length * chunks) return false;
  k.t = x / chunks, k.c0 = x % chunks * kChunk;
  k.n = a.cols - k.c0 < kChunk ? int(a.cols - k.c0) : kChunk;
  k.whole = vector && k.n == kChunk;
  return true;
}

__global__ void __launch_bounds__(kThreads) forwardKernel(const EmbeddingDropoutArgs a) {
  const DropoutKey key = dropoutKeyOf(a.dropout);
  Columns k;
  const bool vector = a.cols % kChunk == 0 && aligned16(a.embedding) && aligned16(a.out) && aligned16(a.positions);
  if (!columnsOf(a, vector, k)) return;
  float pos[kChunk] = {};
  if (a.positions) loadChunk(a.positions + k.t * a.cols + k.c0, pos, k.n, k.whole);
  for (int64_t b = 0; b < a.batch; ++b) {
    const int64_t i0 = (b * a.length + k.t) * a.cols + k.c0;
    float v[kChunk];
    loadChunk(a.embedding + i0, v, k.n, k.whole);
    for (int e = 0; e < k.n; ++e)
      v[e] = __fmul_rn(__fadd_rn(__fmul_rn(v[e], a.scale), pos[e]), dropFactor(a.dropout, key, uint32_t(i0 + e)));
    storeChunk(a.out + i0, v, k.n, k.whole);
  }
}

__global__ void __launch_bounds__(kThreads) backwardKernel(const EmbeddingDropoutArgs a) {
  const DropoutKey key = dropoutKeyOf(a.dropout);
  Columns k;
  const bool vector = a.cols % kChunk == 0 && aligned16(a.dOut) && aligned16(a.dEmbedding) && aligned16(a.dPositions);
  if (!columnsOf(a, vector, k)) return;
  float dPos[kChunk] = {};
  for (int64_t b = 0; b < a.batch; ++b) {
    const int64_t i0 = (b * a.length + k.t) * a.cols + k.c0;
    float g[kChunk];
    loadChunk(a.dOut + i0, g, k.n, k.whole);
    for (int e = 0; e < k.n; ++e) {
      g[e] = __fmul_rn(g[e], dropFactor(a.dropout, key, uint32_t(i0 + e)));
      dPos[e] = __fadd_rn(dPos[e], g[e]);
      g[e] = __fmul_rn(g[e], a.scale);
    }
    storeChunk(a.dEmbedding + i0, g, k.n, k.whole);
  }
  if (a.dPositions) storeChunk(a.dPositions + k.t * a.cols + k.c0, dPos, k.n, k.whole);
}

int64_t blocksOf(const EmbeddingDropoutArgs& a) {
  return (a.length * ((a.cols + kChunk - 1) / kChunk) + kThreads - 1) / kThreads;
}

bool badShape(const EmbeddingDropoutArgs& a) {
  return a.batch < 0 || a.length < 0 || a.cols < 1 || a.batch * a.length * a.cols > int64_t(0xffffffff);
}

}  // namespace

cudaError_t embeddingDropoutForward(const EmbeddingDropoutArgs& a, cudaStream_t stream) {
  if (badShape(a) || !a.embedding || !a.out) return cudaErrorInvalidValue;
  return launch1d(forwardKernel, blocksOf(a), kThreads, stream, a);
}

cudaError_t embeddingDropoutBackward(const EmbeddingDropoutArgs& a, cudaStream_t stream) {
  if (badShape(a) || !a.dOut || !a.dEmbedding) return cudaErrorInvalidValue;
  return launch1d(backwardKernel, blocksOf(a), kThreads, stream, a);
}

}  // namespace xtrap::cuda
