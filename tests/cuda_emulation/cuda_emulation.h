#pragma once
// Runs a CUDA kernel file on the CPU, to test a kernel's logic where there is no GPU (CI, the CPU
// machines): enough of the CUDA runtime, the device intrinsics, bf16 and WMMA for
// src/model/position/linear_bias_attention.cu to compile as plain C++ (through the headers in
// include/, which stand in for the toolkit's) and run. Written here because no Debian package runs
// CUDA C++ without a GPU (GPGPU-Sim and HIP-CPU are not packaged).
//
// What it models, and what it checks:
// - Blocks run one after the other. The threads of a block are fibers (ucontext) on one OS thread,
//   switched only where a thread waits: __syncthreads, __syncwarp and __shfl_xor_sync.
// - The schedule is extreme on purpose. Ascending: the lowest runnable thread runs until it waits,
//   so warp 0 runs until it waits at a block barrier before warp 1 starts, and within a warp lane 0
//   runs to its warp collective before lane 1. Descending: the highest first. A race-free kernel
//   gives bit-identical results under both; a thread that reads shared memory another thread writes
//   without a barrier between reads it unwritten under one of them.
// - Shared memory is poisoned with 0xFF bytes (NaN as float and as bf16) before every block, and a
//   guard past the launch's dynamic size is checked after it.
// - WMMA: every lane holds the whole 16x16 fragment (the real distribution over lanes is
//   unspecified); load_matrix_sync reads all of it, mma_sync computes it in fp32, store_matrix_sync
//   writes the lane's 1/32 of the elements, so a lane that reads another lane's stored elements
//   without a __syncwarp reads them unwritten. Pointers must be 256-bit aligned and ldm a multiple
//   of 16 bytes, as the CUDA programming guide requires.
// - Launches: 1-D blocks of whole warps; dynamic shared memory above 48 KiB needs
//   cudaFuncSetAttribute(MaxDynamicSharedMemorySize), at most 227 KiB (the H100's); grid limits.
// - Faults (the launch then returns cudaErrorLaunchFailure, and lastFault() says what): a deadlock
//   (threads waiting at different barriers), a warp collective with lanes that have exited, a
//   partial warp mask, a misaligned WMMA pointer, a write past the dynamic shared memory.
// Not modelled: timing, occupancy, registers, global-memory bounds, the memory model across blocks
// (blocks never run at once here), fast-math differences (__expf is expf).
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

// ---- qualifiers ----
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__
#define __align__(n) __attribute__((aligned(n)))

// ---- built-in types and variables ----
struct uint3 {
  unsigned x = 0, y = 0, z = 0;
};
struct dim3 {
  unsigned x, y, z;
  constexpr dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};
struct alignas(16) uint4 {
  unsigned x, y, z, w;
};
inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return {x, y, z, w}; }

extern uint3 threadIdx, blockIdx;
extern dim3 blockDim, gridDim;

// ---- bf16: round to nearest even, as __float2bfloat16 ----
struct __nv_bfloat16 {
  uint16_t bits;
};
inline __nv_bfloat16 __float2bfloat16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  if (std::isnan(f)) return {uint16_t((u >> 16) | 0x40u)};  // a quiet NaN of the same sign
  u += 0x7FFFu + ((u >> 16) & 1u);
  return {uint16_t(u >> 16)};
}
inline float __bfloat162float(__nv_bfloat16 h) {
  const uint32_t u = uint32_t(h.bits) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// ---- device intrinsics ----
inline float __expf(float x) { return std::exp(x); }
inline int min(int a, int b) { return a < b ? a : b; }
void __syncthreads();
void __syncwarp(unsigned mask = 0xffffffffu);
float __shfl_xor_sync(unsigned mask, float value, int laneMask, int width = 32);
double __shfl_xor_sync(unsigned mask, double value, int laneMask, int width = 32);

// ---- runtime API ----
enum cudaError {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorInvalidConfiguration = 9,
  cudaErrorLaunchFailure = 719,
  cudaErrorNotSupported = 801,
};
typedef enum cudaError cudaError_t;
struct CUstream_st;
typedef CUstream_st* cudaStream_t;
enum cudaFuncAttribute { cudaFuncAttributeMaxDynamicSharedMemorySize = 8 };
enum cudaDeviceAttr { cudaDevAttrComputeCapabilityMajor = 75, cudaDevAttrMaxSharedMemoryPerBlockOptin = 97 };
struct cudaFuncAttributes {
  size_t sharedSizeBytes = 0;
  int numRegs = 0;
};
struct cudaLaunchConfig_t {
  dim3 gridDim;
  dim3 blockDim;
  size_t dynamicSmemBytes;
  cudaStream_t stream;
  void* attrs;
  unsigned numAttrs;
};

cudaError_t cudaGetLastError();
cudaError_t cudaMemsetAsync(void* pointer, int value, size_t bytes, cudaStream_t stream = nullptr);
// The H100's: compute capability 9, 227 KiB of shared memory per block.
cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attribute, int device);

namespace cuda_emulation {

enum class Schedule { Ascending, Descending };
void setSchedule(Schedule schedule);
// What went wrong in the last launch that returned cudaErrorLaunchFailure or a configuration error.
const std::string& lastFault();

// The kernel file's dynamic shared memory (`extern __shared__ unsigned char name[]`), which the file
// that includes it defines: at least kSharedMemoryBytes.
constexpr size_t kMaxDynamicSharedBytes = 227 * 1024;
constexpr size_t kSharedGuardBytes = 4096;
constexpr size_t kSharedMemoryBytes = kMaxDynamicSharedBytes + kSharedGuardBytes;
bool useSharedMemory(unsigned char* base, size_t bytes);

cudaError_t setMaxDynamicShared(const void* kernel, int bytes);
cudaError_t launch(const void* kernel, const cudaLaunchConfig_t& config, const std::function<void()>& body);
void fault(const std::string& message);
// This thread's lane in its warp (threadIdx.x % 32).
int lane();
// A WMMA load or store of 16x16 elements of elementBytes at pointer with row stride ldm.
void checkMatrixPointer(const void* pointer, unsigned ldm, size_t elementBytes);

inline float toFloat(float x) { return x; }
inline float toFloat(__nv_bfloat16 x) { return __bfloat162float(x); }

}  // namespace cuda_emulation

template <typename T>
cudaError_t cudaFuncSetAttribute(T* kernel, cudaFuncAttribute attribute, int value) {
  if (attribute != cudaFuncAttributeMaxDynamicSharedMemorySize) return cudaErrorNotSupported;
  return cuda_emulation::setMaxDynamicShared(reinterpret_cast<const void*>(kernel), value);
}
// Registers and occupancy are the GPU's compiler's and the GPU's: not emulated.
template <typename T>
cudaError_t cudaFuncGetAttributes(cudaFuncAttributes*, T*) {
  return cudaErrorNotSupported;
}
template <typename T>
cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int*, T, int, size_t) {
  return cudaErrorNotSupported;
}

// The kernel runs to completion before this returns (every stream is synchronous here).
template <typename... ExpTypes, typename... ActTypes>
cudaError_t cudaLaunchKernelEx(const cudaLaunchConfig_t* config, void (*kernel)(ExpTypes...), ActTypes&&... args) {
  std::tuple<std::decay_t<ExpTypes>...> params(std::forward<ActTypes>(args)...);
  return cuda_emulation::launch(reinterpret_cast<const void*>(kernel), *config, [&] { std::apply(kernel, params); });
}

// ---- WMMA (mma.h) ----
namespace nvcuda::wmma {

struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };

// The whole matrix: (M, K) for matrix_a, (K, N) for matrix_b, (M, N) for the accumulator.
template <typename Use, int M, int N, int K, typename T, typename Layout = void>
struct fragment {
  static constexpr int rows = std::is_same<Use, matrix_b>::value ? K : M;
  static constexpr int cols = std::is_same<Use, matrix_a>::value ? K : N;
  float element[rows][cols];
};

template <typename Use, int M, int N, int K, typename T, typename Layout>
void load_matrix_sync(fragment<Use, M, N, K, T, Layout>& f, const T* pointer, unsigned ldm) {
  static_assert(!std::is_same<Use, accumulator>::value, "an accumulator load takes a layout_t");
  cuda_emulation::checkMatrixPointer(pointer, ldm, sizeof(T));
  constexpr bool rowMajor = std::is_same<Layout, row_major>::value;
  for (int r = 0; r < f.rows; ++r)
    for (int c = 0; c < f.cols; ++c)
      f.element[r][c] = cuda_emulation::toFloat(rowMajor ? pointer[r * ldm + c] : pointer[c * ldm + r]);
}

template <int M, int N, int K>
void load_matrix_sync(fragment<accumulator, M, N, K, float>& f, const float* pointer, unsigned ldm, layout_t layout) {
  cuda_emulation::checkMatrixPointer(pointer, ldm, sizeof(float));
  for (int r = 0; r < M; ++r)
    for (int c = 0; c < N; ++c) f.element[r][c] = layout == mem_row_major ? pointer[r * ldm + c] : pointer[c * ldm + r];
}

// This lane's share: the elements r * N + c that are lane modulo 32.
template <int M, int N, int K>
void store_matrix_sync(float* pointer, const fragment<accumulator, M, N, K, float>& f, unsigned ldm, layout_t layout) {
  cuda_emulation::checkMatrixPointer(pointer, ldm, sizeof(float));
  const int lane = cuda_emulation::lane();
  for (int e = lane; e < M * N; e += 32) {
    const int r = e / N, c = e % N;
    (layout == mem_row_major ? pointer[r * ldm + c] : pointer[c * ldm + r]) = f.element[r][c];
  }
}

template <typename Use, int M, int N, int K, typename T, typename Layout>
void fill_fragment(fragment<Use, M, N, K, T, Layout>& f, float value) {
  for (auto& row : f.element)
    for (float& x : row) x = value;
}

// d = a b + c, products of bf16 exact in fp32, summed in fp32 in k order.
template <int M, int N, int K, typename T, typename LayoutA, typename LayoutB>
void mma_sync(fragment<accumulator, M, N, K, float>& d, const fragment<matrix_a, M, N, K, T, LayoutA>& a,
              const fragment<matrix_b, M, N, K, T, LayoutB>& b, const fragment<accumulator, M, N, K, float>& c) {
  float out[M][N];
  for (int r = 0; r < M; ++r)
    for (int n = 0; n < N; ++n) {
      float sum = c.element[r][n];
      for (int k = 0; k < K; ++k) sum += a.element[r][k] * b.element[k][n];
      out[r][n] = sum;
    }
  std::memcpy(d.element, out, sizeof out);
}

}  // namespace nvcuda::wmma
