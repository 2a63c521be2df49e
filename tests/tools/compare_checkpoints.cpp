// compare_checkpoints RUN_A RUN_B: exit 0 when both runs' checkpoints hold bit-identical
// parameters, buffers, step counters, data-order and RNG states; else names the first difference.
// compare_checkpoints --rtol R RUN_A RUN_B: parameters only, each tensor within
// max|a - b| <= R * max|b| (runs whose arithmetic differs in summation order, e.g. 1 vs 2 ranks),
// and the same step and data-order state. --ignore NAME:BEGIN:END (repeatable, before the runs)
// leaves out elements [BEGIN, END) of the flattened parameter NAME: the attention key bias has a
// gradient of exactly 0 (softmax ignores a constant added to a query's logits), so AdamW turns its
// rounding noise into lr-sized steps whose sign differs between summation orders.
#include <torch/torch.h>

#include <algorithm>
#include <cstdio>
#include <exception>
#include <string>
#include <tuple>
#include <vector>

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
  double rtol = -1;  // < 0: bit-identical
  std::vector<std::tuple<std::string, int64_t, int64_t>> ignored;
  while (argc > 3 && std::string(argv[1]).rfind("--", 0) == 0) {
    std::string flag = argv[1], value = argv[2];
    if (flag == "--rtol") {
      rtol = std::stod(value);
    } else if (flag == "--ignore") {
      auto c1 = value.find(':'), c2 = value.rfind(':');
      ignored.emplace_back(value.substr(0, c1), std::stoll(value.substr(c1 + 1, c2 - c1 - 1)),
                           std::stoll(value.substr(c2 + 1)));
    } else {
      break;
    }
    argv += 2;
    argc -= 2;
  }
  if (argc != 3) {
    std::fprintf(stderr, "usage: compare_checkpoints [--rtol R [--ignore NAME:BEGIN:END]...] RUN_A RUN_B\n");
    return 2;
  }
  try {
    Loaded a = load(argv[1]), b = load(argv[2]);
    auto pa = a.model->named_parameters(), pb = b.model->named_parameters();
    auto ba = a.model->named_buffers(), bb = b.model->named_buffers();
    if (pa.size() != pb.size() || ba.size() != bb.size()) return differs("tensor count");
    if (rtol >= 0) {
      double worst = 0;
      for (const auto& item : pa) {
        auto x = item.value().to(torch::kFloat64).reshape({-1}), y = pb[item.key()].to(torch::kFloat64).reshape({-1});
        for (const auto& [name, begin, end] : ignored)
          if (name == item.key()) {
            x.narrow(0, begin, end - begin).zero_();
            y.narrow(0, begin, end - begin).zero_();
          }
        double scale = std::max(y.abs().max().item<double>(), 1e-30);
        double rel = (x - y).abs().max().item<double>() / scale;
        worst = std::max(worst, rel);
        if (!(rel <= rtol))
          return differs(item.key() + " (relative difference " + std::to_string(rel) + " at flat index " +
                         std::to_string((x - y).abs().argmax().item<int64_t>()) + ")");
      }
      if (a.state.step != b.state.step) return differs("step");
      if (a.state.samplerState != b.state.samplerState) return differs("data-order state");
      std::printf("within rtol %g: %zu parameters, step %lld, worst relative difference %.3g\n", rtol, pa.size(),
                  static_cast<long long>(a.state.step), worst);
      return 0;
    }
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
