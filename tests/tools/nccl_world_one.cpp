// GPU test (ctest label gpu): xtrap's DistGroup on NCCL with world size 1, the job torchrun makes
// with one rank on a one-GPU machine. An all-reduce of one rank is the identity, so a tensor and
// a set of gradients (several buckets' worth, summed by GradientSync during backward) must come
// back bit-identical. Without CUDA, or with a LibTorch that has no NCCL, it reports itself
// skipped (exit status 77).
#include <torch/torch.h>

#include <cstdio>

#include "../one_rank_job.h"
#include "dist/dist_group.h"
#include "dist/gradient_sync.h"

using namespace xtrap;

int main() {
  if (!torch::cuda::is_available()) {
    std::puts("skipped: no CUDA device");
    return 77;
  }
#ifndef XTRAP_WITH_NCCL
  std::puts("skipped: this LibTorch has no NCCL");
  return 77;
#else
  test::OneRankJob job(torch::kCUDA);
  DistGroup& group = job.group;

  auto opts = torch::TensorOptions().device(torch::kCUDA);
  auto x = torch::randn({1 << 20}, opts);  // (2^20)
  auto expected = x.clone();
  group.allreduceSum(x);
  bool ok = torch::equal(x, expected);
  std::printf("NCCL world size 1: all-reduce of %lld floats on %s: %s\n", static_cast<long long>(x.numel()),
              torch::cuda::device_count() > 0 ? "cuda:0" : "?", ok ? "identical" : "DIFFERS");

  // 3 x 16 MB of gradients: more than one bucket of DistGroup::kBucketBytes (25 MB).
  std::vector<torch::Tensor> params, grads;
  for (int i = 0; i < 3; ++i) {
    params.push_back(torch::zeros({1 << 22}, opts.requires_grad(true)));  // (4M)
    grads.push_back(torch::randn({1 << 22}, opts));
  }
  GradientSync sync(group, params);
  sync.start();
  for (size_t i = 0; i < params.size(); ++i) (params[i] * grads[i]).sum().backward();  // d/dp = grads[i]
  sync.finish();
  bool gradsOk = true;
  for (size_t i = 0; i < params.size(); ++i) gradsOk = gradsOk && torch::equal(params[i].grad(), grads[i]);
  std::printf("NCCL world size 1: 3 x 4M gradients in %lld buckets, %lld all-reduced during backward: %s\n",
              static_cast<long long>(sync.buckets()), static_cast<long long>(sync.bucketsOverlapped()),
              gradsOk ? "identical" : "DIFFERS");
  group.barrier();
  return ok && gradsOk ? 0 : 1;
#endif
}
