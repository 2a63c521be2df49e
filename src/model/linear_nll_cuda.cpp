#include "model/linear_nll_cuda.h"

#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "cuda/cuda_status_torch.h"
#include "model/linear_nll.cuh"

namespace xtrap {
namespace {

// The kernels' view of one block; keeps the int64 targets it points to alive.
struct BlockView {
  torch::Tensor targets;  // (N) int64, contiguous
  cuda::NllBlock block;
};

BlockView blockView(const torch::Tensor& logits, const torch::Tensor& bias, const torch::Tensor& targets,
                    int64_t begin) {
  TORCH_CHECK(
      logits.is_cuda() && logits.scalar_type() == torch::kBFloat16 && logits.dim() == 2 && logits.stride(1) == 1,
      "linearNll on CUDA: the block's logits must be (N, n) bfloat16 rows on a GPU");
  TORCH_CHECK(!bias.defined() || (bias.scalar_type() == torch::kFloat32 && bias.is_contiguous() &&
                                  bias.numel() == logits.size(1) && bias.device() == logits.device()),
              "linearNll on CUDA: the block's bias must be (n) float32 on the logits' GPU");
  BlockView view;
  view.targets = targets.to(logits.device(), torch::kInt64).contiguous();
  TORCH_CHECK(view.targets.numel() == logits.size(0), "linearNll on CUDA: one target per row");
  view.block.logits = logits.data_ptr();
  view.block.rows = logits.size(0);
  view.block.classes = logits.size(1);
  view.block.stride = logits.stride(0);
  view.block.bias = bias.defined() ? bias.data_ptr<float>() : nullptr;
  view.block.targets = view.targets.data_ptr<int64_t>();
  view.block.begin = begin;
  return view;
}

// (N) float32, contiguous, on the logits' GPU.
void checkRowStats(const torch::Tensor& t, const torch::Tensor& logits, const char* name) {
  TORCH_CHECK(t.scalar_type() == torch::kFloat32 && t.is_contiguous() && t.numel() == logits.size(0) &&
                  t.device() == logits.device(),
              "linearNll on CUDA: ", name, " must be (N) float32 on the logits' GPU");
}

}  // namespace

bool fusedNllTakes(const torch::Device& device, torch::ScalarType dtype) {
  if (!device.is_cuda() || dtype != torch::kBFloat16) return false;
  return at::cuda::getDeviceProperties(device.has_index() ? device.index() : c10::cuda::current_device())->major >= 8;
}

void fusedNllBlockForward(const torch::Tensor& logits, const torch::Tensor& bias, const torch::Tensor& targets,
                          int64_t begin, torch::Tensor& lse, torch::Tensor& targetLogit) {
  c10::cuda::CUDAGuard guard(logits.device());
  BlockView view = blockView(logits, bias, targets, begin);
  checkRowStats(lse, logits, "lse");
  checkRowStats(targetLogit, logits, "the target logits");
  checkCudaStatus(cuda::nllBlockForward(view.block, lse.data_ptr<float>(), targetLogit.data_ptr<float>(),
                                        c10::cuda::getCurrentCUDAStream().stream()),
                  "linearNll on CUDA, forward");
}

torch::Tensor fusedNllBlockGradient(const torch::Tensor& logits, const torch::Tensor& bias,
                                    const torch::Tensor& targets, int64_t begin, const torch::Tensor& lse,
                                    const torch::Tensor& gradNll) {
  c10::cuda::CUDAGuard guard(logits.device());
  BlockView view = blockView(logits, bias, targets, begin);
  checkRowStats(lse, logits, "lse");
  checkRowStats(gradNll, logits, "the incoming gradient");
  auto grad = torch::empty({logits.size(0), logits.size(1)}, logits.options());  // (N, n) bf16
  checkCudaStatus(cuda::nllBlockGradient(view.block, lse.data_ptr<float>(), gradNll.data_ptr<float>(), grad.data_ptr(),
                                         c10::cuda::getCurrentCUDAStream().stream()),
                  "linearNll on CUDA, backward");
  return grad;
}

}  // namespace xtrap
