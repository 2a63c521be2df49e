// The residual add with dropout and LayerNorm on CUDA (add_norm.cuh).
//
// One warp per row, 8 rows per thread block. The lanes walk the row 8 columns at a time (16-byte
// loads of bf16, two of float32, where every pointer is 16-byte aligned and C a multiple of 8, else
// one element at a time): a first walk writes out = x + dropout(y) and sums it, a second sums the
// squared deviations from the mean, a third writes normed; the second and third read back the
// row this warp has just written (from L1/L2). The sums are merged by a butterfly over the warp,
// whose every lane ends with the same bits; a row's statistics are the same run to run.
// Backward: the same walk per row for dX and dY (two walks: the two row sums, then the outputs),
// then the column sums of dWeight and dBias in two more passes: blocks of 64 rows x 256 columns
// write partial sums, one thread per column adds them in order.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "cuda/element_chunks.cuh"
#include "cuda/launch_1d.cuh"
#include "model/add_norm.cuh"
#include "model/counter_dropout.cuh"

namespace xtrap::cuda {
namespace {

using bf16 = __nv_bfloat16;

constexpr int kWarps = 8;  // rows per thread block
constexpr int kThreads = 32 * kWarps;
constexpr int64_t kPartialRows = 64;  // rows per block of the column sums

// Calls f(c, n, whole) for this lane's chunks of a row of `cols`: n = min(8, cols - c) columns
// from c, whole when they are one aligned 16-byte chunk (`vector`: every row's are).
template <typename F>
__device__ __forceinline__ void forEachChunk(int64_t cols, bool vector, int lane, F f) {
  for (int64_t c = int64_t(lane) * kChunk; c < cols; c += 32 * kChunk) {
    const int n = cols - c < kChunk ? int(cols - c) : kChunk;
    f(c, n, vector && n == kChunk);
  }
}

// The sum over the warp, the same bits in every lane (each step adds a pair in both lanes).
__device__ __forceinline__ float warpSum(float v) {
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

// The warp of row r, or r >= N (the whole warp returns).
__device__ __forceinline__ int64_t warpRow() { return int64_t(blockIdx.x) * kWarps + threadIdx.x / 32; }

template <typename Y, typename Normed>
__global__ void __launch_bounds__(kThreads) forwardKernel(const AddNormArgs a) {
  const DropoutKey key = dropoutKeyOf(a.dropout);
  const int64_t r = warpRow();
  if (r >= a.rows) return;
  const int lane = threadIdx.x % 32;
  const int64_t C = a.cols;
  const bool vector = C % kChunk == 0 && aligned16(a.x) && aligned16(a.y) && aligned16(a.out) && aligned16(a.normed) &&
                      aligned16(a.weight) && aligned16(a.bias);
  const float* x = a.x + r * C;
  const Y* y = static_cast<const Y*>(a.y) + r * C;
  float* out = a.out + r * C;
  Normed* normed = static_cast<Normed*>(a.normed) + r * C;

  float sum = 0.f;
  forEachChunk(C, vector, lane, [&](int64_t c, int n, bool whole) {
    float xv[kChunk], yv[kChunk];
    loadChunk(x + c, xv, n, whole);
    loadChunk(y + c, yv, n, whole);
    for (int k = 0; k < n; ++k) {
      xv[k] = __fadd_rn(xv[k], __fmul_rn(yv[k], dropFactor(a.dropout, key, uint32_t(r * C + c + k))));
      sum += xv[k];
    }
    storeChunk(out + c, xv, n, whole);
  });
  const float mean = warpSum(sum) / float(C);
  float squares = 0.f;
  forEachChunk(C, vector, lane, [&](int64_t c, int n, bool whole) {
    float v[kChunk];
    loadChunk(out + c, v, n, whole);
    for (int k = 0; k < n; ++k) squares += (v[k] - mean) * (v[k] - mean);
  });
  const float rstd = 1.f / sqrtf(warpSum(squares) / float(C) + a.eps);
  forEachChunk(C, vector, lane, [&](int64_t c, int n, bool whole) {
    float v[kChunk], w[kChunk], b[kChunk];
    loadChunk(out + c, v, n, whole);
    loadChunk(a.weight + c, w, n, whole);
    loadChunk(a.bias + c, b, n, whole);
    for (int k = 0; k < n; ++k) v[k] = (v[k] - mean) * rstd * w[k] + b[k];
    storeChunk(normed + c, v, n, whole);
  });
  if (lane == 0) a.mean[r] = mean, a.rstd[r] = rstd;
}

template <typename Y, typename Normed>
__global__ void __launch_bounds__(kThreads) backwardRowsKernel(const AddNormBackwardArgs a) {
  const AddNormArgs& f = a.forward;
  const DropoutKey key = dropoutKeyOf(f.dropout);
  const int64_t r = warpRow();
  if (r >= f.rows) return;
  const int lane = threadIdx.x % 32;
  const int64_t C = f.cols;
  const bool vector = C % kChunk == 0 && aligned16(f.out) && aligned16(f.weight) && aligned16(a.dOut) &&
                      aligned16(a.dNormed) && aligned16(a.dX) && aligned16(a.dY);
  const float* out = f.out + r * C;
  const Normed* dNormed = static_cast<const Normed*>(a.dNormed) + r * C;
  const float mean = f.mean[r], rstd = f.rstd[r];

  // g = dNormed * weight: its mean, and that of g * xhat.
  float sumG = 0.f, sumGX = 0.f;
  forEachChunk(C, vector, lane, [&](int64_t c, int n, bool whole) {
    float v[kChunk], d[kChunk], w[kChunk];
    loadChunk(out + c, v, n, whole);
    loadChunk(dNormed + c, d, n, whole);
    loadChunk(f.weight + c, w, n, whole);
    for (int k = 0; k < n; ++k) {
      const float g = d[k] * w[k];
      sumG += g;
      sumGX += g * ((v[k] - mean) * rstd);
    }
  });
  const float meanG = warpSum(sumG) / float(C), meanGX = warpSum(sumGX) / float(C);
  forEachChunk(C, vector, lane, [&](int64_t c, int n, bool whole) {
    float v[kChunk], d[kChunk], w[kChunk], dOut[kChunk] = {};
    loadChunk(out + c, v, n, whole);
    loadChunk(dNormed + c, d, n, whole);
    loadChunk(f.weight + c, w, n, whole);
    if (a.dOut) loadChunk(a.dOut + r * C + c, dOut, n, whole);
    float dy[kChunk];
    for (int k = 0; k < n; ++k) {
      const float xhat = (v[k] - mean) * rstd;
      dOut[k] += rstd * (d[k] * w[k] - meanG - xhat * meanGX);
      dy[k] = dOut[k] * dropFactor(f.dropout, key, uint32_t(r * C + c + k));
    }
    storeChunk(a.dX + r * C + c, dOut, n, whole);
    storeChunk(static_cast<Y*>(a.dY) + r * C + c, dy, n, whole);
  });
}

// Block b: columns [256 (b % colBlocks), +256) of rows [64 (b / colBlocks), +64); partial sums
// (rowChunks, 2, C): dWeight's, then dBias's.
template <typename Normed>
__global__ void __launch_bounds__(kThreads) partialSumsKernel(const AddNormBackwardArgs a) {
  const AddNormArgs& f = a.forward;
  const int64_t colBlocks = (f.cols + kThreads - 1) / kThreads;
  const int64_t chunk = blockIdx.x / colBlocks, c = (blockIdx.x % colBlocks) * kThreads + threadIdx.x;
  if (c >= f.cols) return;
  const Normed* dNormed = static_cast<const Normed*>(a.dNormed);
  float sumW = 0.f, sumB = 0.f;
  const int64_t end = (chunk + 1) * kPartialRows < f.rows ? (chunk + 1) * kPartialRows : f.rows;
  for (int64_t r = chunk * kPartialRows; r < end; ++r) {
    float d[kChunk];
    loadChunk(dNormed + r * f.cols + c, d, 1, false);
    sumW += d[0] * ((f.out[r * f.cols + c] - f.mean[r]) * f.rstd[r]);
    sumB += d[0];
  }
  a.partial[chunk * 2 * f.cols + c] = sumW;
  a.partial[chunk * 2 * f.cols + f.cols + c] = sumB;
}

__global__ void __launch_bounds__(kThreads) columnSumsKernel(const AddNormBackwardArgs a) {
  const int64_t C = a.forward.cols, chunks = (a.forward.rows + kPartialRows - 1) / kPartialRows;
  const int64_t c = int64_t(blockIdx.x) * kThreads + threadIdx.x;
  if (c >= C) return;
  float sumW = 0.f, sumB = 0.f;
  for (int64_t chunk = 0; chunk < chunks; ++chunk) {
    sumW += a.partial[chunk * 2 * C + c];
    sumB += a.partial[chunk * 2 * C + C + c];
  }
  a.dWeight[c] = sumW;
  a.dBias[c] = sumB;
}

bool badShape(const AddNormArgs& a) {
  return a.rows < 0 || a.cols < 1 || a.rows * a.cols > int64_t(0xffffffff) || !a.weight || !a.bias || !a.mean ||
         !a.rstd || !a.out;
}

template <typename Y, typename Normed>
cudaError_t forwardAs(const AddNormArgs& a, cudaStream_t stream) {
  return launch1d(forwardKernel<Y, Normed>, (a.rows + kWarps - 1) / kWarps, kThreads, stream, a);
}

template <typename Y, typename Normed>
cudaError_t backwardAs(const AddNormBackwardArgs& a, cudaStream_t stream) {
  const int64_t N = a.forward.rows, C = a.forward.cols, colBlocks = (C + kThreads - 1) / kThreads;
  cudaError_t status = launch1d(backwardRowsKernel<Y, Normed>, (N + kWarps - 1) / kWarps, kThreads, stream, a);
  if (status != cudaSuccess) return status;
  status =
      launch1d(partialSumsKernel<Normed>, colBlocks * ((N + kPartialRows - 1) / kPartialRows), kThreads, stream, a);
  if (status != cudaSuccess) return status;
  return launch1d(columnSumsKernel, colBlocks, kThreads, stream, a);
}

}  // namespace

cudaError_t addNormForward(const AddNormArgs& a, cudaStream_t stream) {
  if (badShape(a) || !a.x || !a.y || !a.normed) return cudaErrorInvalidValue;
  if (a.yBf16) return a.normedBf16 ? forwardAs<bf16, bf16>(a, stream) : forwardAs<bf16, float>(a, stream);
  return a.normedBf16 ? forwardAs<float, bf16>(a, stream) : forwardAs<float, float>(a, stream);
}

int64_t addNormPartialFloats(int64_t rows, int64_t cols) {
  return 2 * cols * ((rows + kPartialRows - 1) / kPartialRows);
}

cudaError_t addNormBackward(const AddNormBackwardArgs& a, cudaStream_t stream) {
  const AddNormArgs& f = a.forward;
  if (badShape(f) || !a.dNormed || !a.dX || !a.dY || !a.dWeight || !a.dBias || !a.partial) return cudaErrorInvalidValue;
  if (f.yBf16) return f.normedBf16 ? backwardAs<bf16, bf16>(a, stream) : backwardAs<bf16, float>(a, stream);
  return f.normedBf16 ? backwardAs<float, bf16>(a, stream) : backwardAs<float, float>(a, stream);
}

}  // namespace xtrap::cuda
