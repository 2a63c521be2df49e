#pragma once
// Runs a CUDA kernel file on the CPU, to test a kernel's logic where there is no GPU (CI, the CPU
// machines): enough of the CUDA runtime, the device intrinsics, bf16 and warp_mma.cuh for
// src/model/position/linear_bias_attention*.cu to compile as plain C++ (through the headers in
// include/, which stand in for the toolkit's) and run. Written here because no Debian package runs
// CUDA C++ without a GPU (GPGPU-Sim and HIP-CPU are not packaged).
//
// What it models, and what it checks:
// - Blocks run one after the other. The threads of a block are fibers (ucontext) on one OS thread,
//   switched only where a thread waits: __syncthreads, __syncwarp and the warp collectives
//   (__shfl_xor_sync, mma.sync, ldmatrix).
// - The schedule is extreme on purpose. Ascending: the lowest runnable thread runs until it waits,
//   so warp 0 runs until it waits at a block barrier before warp 1 starts, and within a warp lane 0
//   runs to its warp collective before lane 1. Descending: the highest first. A race-free kernel
//   gives bit-identical results under both; a thread that reads shared memory another thread writes
//   without a barrier between reads it unwritten under one of them.
// - Shared memory is poisoned with 0xFF bytes (NaN as float and as bf16) before every block, and a
//   guard past the launch's dynamic size is checked after it.
// - mma.sync m16n8k16 and ldmatrix .x4 (include/cuda/warp_mma.cuh): each lane holds only
//   its registers, laid out as the PTX ISA documents; the warp exchanges them at the collective,
//   and each lane computes its own 4 outputs (fp32, summed in k order) or reads its own elements.
//   ldmatrix row addresses must be 16-byte aligned and inside the launch's dynamic shared memory;
//   the lanes of a warp all read before any of them goes on, as on the GPU.
// - wgmma.mma_async m64n64k16 (include/cuda/warpgroup_mma.cuh): each warp computes its 16
//   rows of the warpgroup's product, from its lanes' registers (A, exchanged at the issue) or from
//   shared memory through the descriptors, read as the PTX ISA lays out operands without swizzling
//   (core matrices of 8 rows of 16 bytes; K-major: the leading offset between core matrices along
//   K, the stride offset along M or N; MN-major: the same along K and along M or N). Like the
//   asynchronous copies, a product is computed at either end of what wgmma allows: under the
//   ascending schedule at the wait (wgmma.wait_group N) that leaves its group no longer among the
//   last N committed, so accumulators read before it are stale (NaN where the product overwrites
//   them), and at its issue under the descending one, so shared operands written after the issue
//   are not read. A product issued without wgmma.fence since the last wait, committed products
//   never waited for, or an A in registers changed before the wait that completes its product,
//   fault; descriptors must lie in the launch's dynamic shared memory and ask for no swizzling.
//   The warpgroup instructions are collective: every thread of a warpgroup (4 whole warps) must
//   issue the same ones in the same order, with the same descriptors, or the launch faults. The
//   proxies: a product must not read a byte of shared memory that a store or an asynchronous copy
//   changed after the last time every thread of the block had run fence.proxy.async (a stricter
//   rule than the GPU's, where only the writing thread must: the kernels here fence in every
//   thread), or the launch faults.
// - Asynchronous copies (cuda_pipeline_primitives.h: cp.async) land at either end of what CUDA
//   allows: under the ascending schedule only when the thread waits for their batch
//   (__pipeline_wait_prior), so a read of the destination before that wait, or by another thread
//   before a barrier after it, sees the old contents; under the descending one at once, so a copy
//   into a buffer that other warps still read changes what they read. Sizes 4, 8, 16 bytes, both
//   pointers aligned to the size, the destination inside the launch's dynamic shared memory.
// - Launches: 1-D blocks of whole warps; dynamic shared memory above 48 KiB needs
//   cudaFuncSetAttribute(MaxDynamicSharedMemorySize), at most 227 KiB (the H100's); grid limits.
// - Faults (the launch then returns cudaErrorLaunchFailure, and lastFault() says what): a deadlock
//   (threads waiting at different barriers), a warp collective with lanes that have exited, a
//   partial warp mask, a bad ldmatrix address or asynchronous copy, a write past the dynamic shared
//   memory.
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
struct alignas(16) float4 {
  float x, y, z, w;
};
inline float4 make_float4(float x, float y, float z, float w) { return {x, y, z, w}; }

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
inline unsigned short __bfloat16_as_ushort(__nv_bfloat16 h) { return h.bits; }
inline float __bfloat162float(__nv_bfloat16 h) {
  const uint32_t u = uint32_t(h.bits) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// ---- device intrinsics ----
inline float __expf(float x) { return std::exp(x); }
inline float __uint_as_float(unsigned u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}
// One rounding each, never fused into a multiply-add (CMakeLists compiles the emulation with
// -ffp-contract=off).
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fadd_rn(float a, float b) { return a + b; }
inline int min(int a, int b) { return a < b ? a : b; }
// Atomic only in that nothing else runs while it does: blocks run one after the other, and a block's
// threads switch only where they wait.
inline float atomicAdd(float* address, float value) {
  const float old = *address;
  *address = old + value;
  return old;
}
// sm_90's vector add: each element added on its own, as four float adds would. The address must be
// 16-byte aligned (a misaligned address faults on the GPU).
float4 atomicAdd(float4* address, float4 value);
void __syncthreads();
void __pipeline_memcpy_async(void* dst, const void* src, size_t sizeAndAlign, size_t zfill = 0);
void __pipeline_commit();
void __pipeline_wait_prior(size_t prior);
void __syncwarp(unsigned mask = 0xffffffffu);
float __shfl_xor_sync(unsigned mask, float value, int laneMask, int width = 32);
double __shfl_xor_sync(unsigned mask, double value, int laneMask, int width = 32);
int __any_sync(unsigned mask, int predicate);  // whether any lane's predicate is nonzero

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
enum cudaDeviceAttr {
  cudaDevAttrComputeCapabilityMajor = 75,
  cudaDevAttrComputeCapabilityMinor = 76,
  cudaDevAttrMaxSharedMemoryPerBlockOptin = 97
};
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
// The H100's: compute capability 9.0, 227 KiB of shared memory per block. One device, 0.
cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attribute, int device);
cudaError_t cudaGetDevice(int* device);

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
// That memory (for the emulation's own test kernels, which have no kernel file).
unsigned char* sharedMemory();

cudaError_t setMaxDynamicShared(const void* kernel, int bytes);
cudaError_t launch(const void* kernel, const cudaLaunchConfig_t& config, const std::function<void()>& body);
void fault(const std::string& message);
// This thread's lane in its warp (threadIdx.x % 32).
int lane();
// The warp collectives behind include/cuda/warp_mma.cuh.
void multiplyAddM16N8K16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1);
void loadMatrices(uint32_t (&r)[4], const __nv_bfloat16* row, bool transposed);
// Its address in the shared window (__cvta_generic_to_shared): the offset from the dynamic shared
// memory's start, which must hold it.
uint32_t sharedAddress(const void* pointer);
// The warpgroup operations behind include/cuda/warpgroup_mma.cuh: d (this warp's 16 rows
// of 64 x 64) += A B (accumulate, scale-d true) or d = A B, with A from registers (a, this warp's 16
// rows as mma.sync's A fragment) or, where a is nullptr, from aDescriptor; each shared operand
// K-major, or MN-major with its flag.
void warpgroupArrive();
void warpgroupMultiplyAdd(float (&d)[8][4], const uint32_t* a, uint64_t aDescriptor, uint64_t bDescriptor,
                          bool aMnMajor, bool bMnMajor, bool accumulate);
void warpgroupCommit();
// Waits until at most `pending` committed groups are in flight (wgmma.wait_group pending).
void warpgroupWait(int pending);
// fence.proxy.async by this thread: once every thread of the block has run it, what they wrote to
// shared memory before is what the async proxy reads.
void fenceProxyAsync();

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
