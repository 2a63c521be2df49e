// Rotary embedding on CUDA (rotary.cuh).
//
// A thread rotates 8 pairs of one row: one 16-byte load from each half of the row, 8 cos and 8
// sin of the row's angles, one 16-byte store into each half of the output. A row of D = 64 is 4
// threads; consecutive threads take consecutive pieces of a row, then the next row. The (T, D/2)
// tables are small beside q and k (64 KiB at T = 512, D = 64) and stay in cache, so each element
// of x is read from memory once and written once. Memory-bound by design.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/bf16_words.cuh"
#include "model/position/rotary.cuh"

namespace xtrap::cuda {
namespace {

using bf16 = __nv_bfloat16;

constexpr int kThreads = 256;
constexpr int kPairs = 8;  // pairs a thread: 16 bytes of each half of a row

__global__ void __launch_bounds__(kThreads) rotateKernel(const RotaryArgs a) {
  const int half = a.D / 2, pieces = half / kPairs;  // a row's threads
  const int64_t x = int64_t(blockIdx.x) * kThreads + threadIdx.x;
  if (x >= int64_t(a.B) * a.H * a.T * pieces) return;
  const int p0 = int(x % pieces) * kPairs;
  const int64_t row = x / pieces;  // (b H + h) T + t
  const int t = int(row % a.T), h = int(row / a.T % a.H), b = int(row / a.T / a.H);
  const bf16* in = static_cast<const bf16*>(a.x.data) + b * a.x.sb + h * a.x.sh + int64_t(t) * a.x.st + p0;
  bf16* out = static_cast<bf16*>(a.out) + row * a.D + p0;
  const float *cosRow = a.cos + int64_t(t) * half + p0, *sinRow = a.sin + int64_t(t) * half + p0;

  const uint4 first = *reinterpret_cast<const uint4*>(in), second = *reinterpret_cast<const uint4*>(in + half);
  const uint32_t firstWords[4] = {first.x, first.y, first.z, first.w};
  const uint32_t secondWords[4] = {second.x, second.y, second.z, second.w};
  uint32_t firstOut[4], secondOut[4];
  const float sinSign = a.transposed ? -1.f : 1.f;
#pragma unroll
  for (int w = 0; w < 4; ++w) {
    float y1[2], y2[2];
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      float x1 = e ? highBf16(firstWords[w]) : lowBf16(firstWords[w]);
      float x2 = e ? highBf16(secondWords[w]) : lowBf16(secondWords[w]);
      if (a.transposed) x1 = __fmul_rn(x1, a.factor), x2 = __fmul_rn(x2, a.factor);
      const float c = cosRow[2 * w + e], s = sinSign * sinRow[2 * w + e];
      y1[e] = __fadd_rn(__fmul_rn(x1, c), -__fmul_rn(x2, s));
      y2[e] = __fadd_rn(__fmul_rn(x2, c), __fmul_rn(x1, s));
      if (!a.transposed) y1[e] = __fmul_rn(y1[e], a.factor), y2[e] = __fmul_rn(y2[e], a.factor);
    }
    firstOut[w] = bf16Word(y1[0], y1[1]);
    secondOut[w] = bf16Word(y2[0], y2[1]);
  }
  *reinterpret_cast<uint4*>(out) = make_uint4(firstOut[0], firstOut[1], firstOut[2], firstOut[3]);
  *reinterpret_cast<uint4*>(out + half) = make_uint4(secondOut[0], secondOut[1], secondOut[2], secondOut[3]);
}

}  // namespace

const char* rotaryCheck(const RotaryArgs& args) {
  if (args.B < 1 || args.H < 1 || args.T < 1) return "rotary on CUDA: B, H and T must be positive";
  if (args.D < 16 || args.D % 16 != 0) return "rotary on CUDA: the head dimension must be a multiple of 16";
  return nullptr;
}

// Through cudaLaunchKernelEx rather than <<<...>>>, so that this file also compiles as plain C++
// (tests/cuda_emulation runs its kernel on the CPU).
cudaError_t rotate(const RotaryArgs& args, cudaStream_t stream) {
  if (rotaryCheck(args) || !args.x.data || !args.out || !args.cos || !args.sin) return cudaErrorInvalidValue;
  const int64_t threads = int64_t(args.B) * args.H * args.T * (args.D / 2 / kPairs);
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(unsigned((threads + kThreads - 1) / kThreads));
  config.blockDim = dim3(kThreads);
  config.stream = stream;
  return cudaLaunchKernelEx(&config, rotateKernel, args);
}

}  // namespace xtrap::cuda
