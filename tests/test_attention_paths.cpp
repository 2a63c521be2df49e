// The block attention path (bias computed per query block, O(T) memory) equals the full-matrix
// path for every position method and variant, forward and backward.
#include <catch2/catch.hpp>

#include "model/transformer.h"
#include "test_support.h"

using namespace xtrap;

TEST_CASE("block attention equals full-matrix attention, forward and backward") {
  struct Case {
    std::string pos, arch;
  };
  std::vector<Case> cases;
  for (std::string pos : {"none", "sinusoidal", "learned", "rotary", "t5", "alibi"}) cases.push_back({pos, "decoder"});
  for (std::string pos : {"none", "sinusoidal", "learned", "rotary", "t5", "alibi", "alibi-offset", "alibi-onesided",
                          "alibi-learned", "bialibi"})
    cases.push_back({pos, "encoder"});
  for (const auto& c : cases) {
    INFO(c.arch << " " << c.pos);
    auto cfg = test::tinyConfig(c.pos, c.arch);
    Transformer model(cfg);
    model->eval();  // no dropout; gradients still flow
    auto x = torch::randint(0, 50, {2, 21}, torch::kLong);
    auto gradsOf = [&](int64_t block) {
      model->zero_grad();
      auto f = model->features(x, {block, nullptr});
      (f * f).sum().backward();
      std::vector<torch::Tensor> g;
      for (auto& p : model->parameters())
        if (p.grad().defined()) g.push_back(p.grad().clone());
      return std::make_pair(f.detach(), g);
    };
    auto [full, fullGrads] = gradsOf(0);
    for (int64_t block : {1, 5, 8}) {
      auto [blocked, blockGrads] = gradsOf(block);
      CHECK(test::maxAbsDiff(full, blocked) <= 1e-4);
      REQUIRE(fullGrads.size() == blockGrads.size());
      double worst = 0;
      for (size_t k = 0; k < fullGrads.size(); ++k)
        worst = std::max(worst, test::maxAbsDiff(fullGrads[k], blockGrads[k]));
      INFO("block " << block << " largest gradient difference " << worst);
      CHECK(worst <= 1e-4);
    }
  }
}
