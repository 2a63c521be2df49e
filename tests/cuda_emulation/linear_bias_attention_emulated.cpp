// The fused ALiBi-family attention kernels (src/model/position/linear_bias_attention*.cu) compiled
// as plain C++ against cuda_emulation.h, for tests/test_linear_bias_attention_emulated.cpp: every
// file of the passes in this one translation unit, which the kernels' shared memory needs.
#include "cuda_emulation.h"

// The kernels' dynamic shared memory: smemAt declares `extern __shared__ unsigned char smem[]` in
// xtrap::cuda's unnamed namespace, so this file defines it in that namespace, before the kernels.
namespace xtrap::cuda {
namespace {
alignas(128) unsigned char smem[cuda_emulation::kSharedMemoryBytes];
const bool kSharedMemoryRegistered = cuda_emulation::useSharedMemory(smem, sizeof smem);
}  // namespace
}  // namespace xtrap::cuda

#include "model/position/linear_bias_attention.cu"
#include "model/position/linear_bias_attention_backward.cu"
#include "model/position/linear_bias_attention_backward_atomic_dq.cu"
#include "model/position/linear_bias_attention_backward_two_pass.cu"
#include "model/position/linear_bias_attention_forward.cu"
#include "model/position/linear_bias_attention_warpgroup_probe.cu"
