#include "eval/greedy_generation.h"

#include <algorithm>
#include <stdexcept>

#include "util/execution_context.h"
#include "util/interrupt.h"

namespace xtrap {

Generation generateGreedy(Transformer& model, const std::vector<int32_t>& context, int64_t maxNew, int64_t chunk,
                          const std::vector<int32_t>& stop) {
  if (context.empty()) throw std::invalid_argument("generation needs a context of at least one token");
  torch::NoGradGuard noGrad;
  model->eval();
  KvCache cache;
  auto ids = [](const std::vector<int32_t>& v, size_t from, size_t to) {
    std::vector<int64_t> out(v.begin() + std::ptrdiff_t(from), v.begin() + std::ptrdiff_t(to));
    return torch::tensor(out, torch::kLong).unsqueeze(0);  // (1, n)
  };
  auto step = size_t(chunk > 0 ? chunk : int64_t(context.size()));
  torch::Tensor last;  // (1, C) features of the newest position
  for (size_t from = 0; from < context.size(); from += step) {
    throwIfInterrupted();
    auto feats = model->features(ids(context, from, std::min(context.size(), from + step)), {}, &cache);
    last = feats.select(1, feats.size(1) - 1);
  }
  Generation g;
  for (int64_t n = 0; n < maxNew; ++n) {
    auto logProbs = torch::log_softmax(model->logits(last).to(torch::kFloat32), -1);  // (1, V)
    auto best = logProbs.max(-1);                                                     // (value (1), index (1))
    auto token = int32_t(toHost(std::get<1>(best)).item<int64_t>());
    g.tokens.push_back(token);
    g.logProbs.push_back(toHost(std::get<0>(best)).item<double>());
    if (std::find(stop.begin(), stop.end(), token) != stop.end() || n + 1 == maxNew) break;
    last = model->features(torch::tensor({{int64_t(token)}}, torch::kLong), {}, &cache).select(1, 0);
  }
  return g;
}

}  // namespace xtrap
