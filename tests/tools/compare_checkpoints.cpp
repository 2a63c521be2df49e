// compare_checkpoints RUN_A RUN_B: exit 0 when both runs' checkpoints hold bit-identical
// parameters, buffers, step counters, data-order and RNG states; else names the first difference.
#include <torch/torch.h>

#include <cstdio>
#include <exception>

#include "run/checkpoint.h"
#include "run/run_directory.h"

namespace {

struct Loaded {
  xtrap::Transformer model{nullptr};
  xtrap::TrainingState state;
};

Loaded load(const char* dir) {
  xtrap::RunInfo run = xtrap::readRunInfo(dir);
  Loaded l{xtrap::Transformer(run.model), {}};
  l.state = xtrap::loadCheckpoint(xtrap::checkpointPath(run.dir), l.model, nullptr);
  return l;
}

int differs(const std::string& what) {
  std::fprintf(stderr, "checkpoints differ: %s\n", what.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: compare_checkpoints RUN_A RUN_B\n");
    return 2;
  }
  try {
    Loaded a = load(argv[1]), b = load(argv[2]);
    auto pa = a.model->named_parameters(), pb = b.model->named_parameters();
    auto ba = a.model->named_buffers(), bb = b.model->named_buffers();
    if (pa.size() != pb.size() || ba.size() != bb.size()) return differs("tensor count");
    for (const auto& [named, other] : {std::pair{&pa, &pb}, std::pair{&ba, &bb}})
      for (const auto& item : *named)
        if (!torch::equal(item.value(), (*other)[item.key()])) return differs(item.key());
    if (a.state.step != b.state.step) return differs("step");
    if (a.state.tokensSeen != b.state.tokensSeen) return differs("tokens seen");
    if (a.state.badSteps != b.state.badSteps) return differs("bad steps");
    if (a.state.samplerState != b.state.samplerState) return differs("data-order state");
    if (!torch::equal(a.state.torchRngState, b.state.torchRngState)) return differs("torch RNG state");
    std::printf("identical: %zu parameters, %zu buffers, step %lld\n", pa.size(), ba.size(),
                static_cast<long long>(a.state.step));
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "compare_checkpoints: %s\n", e.what());
    return 2;
  }
}
