// Context extension's attention (extendedAttention, attention.h) against a float64 reference
// written pair by pair here: the logit of (i, j) is q_i turned by the seen distance d' against k_j
// (rotary's <R(m) q, R(n) k> = <R(m - n) q, k>), or q_i . k_j - m_h d' (ALiBi), with d' from each
// paper's formula spelled out below, not from context_extension.cpp; hidden and future keys
// excluded from the softmax. Then: a window that covers the sequence changes nothing, the probes
// see zeros where keys are hidden, and a model refuses what has no meaning for it.
#include <catch2/catch.hpp>
#include <cmath>
#include <functional>
#include <limits>

#include "model/attention.h"
#include "model/linear_bias_spec.h"
#include "model/position/linear_bias.h"
#include "model/position/rotary.h"
#include "test_support.h"

using namespace xtrap;

namespace {

constexpr int64_t T = 16, H = 2, D = 8;

struct Pair {
  bool seen;
  double distance;  // d' where seen
};
using PairRule = std::function<Pair(int64_t i, int64_t j)>;

// x (D) turned by angle d * base^(-2p/D) per pair p (rotate-half layout), float64.
std::vector<double> turned(const torch::Tensor& x, double d) {
  std::vector<double> out(D);
  for (int64_t p = 0; p < D / 2; ++p) {
    double a = d * std::pow(10000.0, -2.0 * double(p) / double(D));
    double x1 = x[p].item<double>(), x2 = x[p + D / 2].item<double>();
    out[size_t(p)] = x1 * std::cos(a) - x2 * std::sin(a);
    out[size_t(p + D / 2)] = x2 * std::cos(a) + x1 * std::sin(a);
  }
  return out;
}

// The reference output (H, T, D) for q, k, v (1, H, T, D) float64, logits scaled q already.
torch::Tensor reference(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, const PairRule& rule,
                        bool rotary, const std::vector<double>& slopes, const std::function<double(int64_t)>& qScale) {
  auto out = torch::zeros({H, T, D}, torch::kFloat64);
  for (int64_t h = 0; h < H; ++h)
    for (int64_t i = 0; i < T; ++i) {
      std::vector<double> logits(T, -std::numeric_limits<double>::infinity());
      for (int64_t j = 0; j <= i; ++j) {
        Pair p = rule(i, j);
        if (!p.seen) continue;
        auto qi = q[0][h][i] * qScale(i);
        double dot = 0;
        if (rotary) {
          auto tq = turned(qi, p.distance);
          for (int64_t c = 0; c < D; ++c) dot += tq[size_t(c)] * k[0][h][j][c].item<double>();
        } else {
          dot = (qi * k[0][h][j]).sum().item<double>() - (slopes.empty() ? 0.0 : slopes[size_t(h)] * p.distance);
        }
        logits[size_t(j)] = dot;
      }
      double top = *std::max_element(logits.begin(), logits.end()), sum = 0;
      for (double& l : logits) sum += (l = std::exp(l - top));
      for (int64_t j = 0; j < T; ++j) out[h][i] += v[0][h][j] * (logits[size_t(j)] / sum);
    }
  return out;
}

struct Case {
  std::string name;
  ExtensionSettings settings;
  PairRule rule;
  int64_t trainLength = 8;
};

std::vector<Case> cases() {
  std::vector<Case> c;
  ExtensionSettings sinks;
  sinks.sinkTokens = 2, sinks.window = 5;
  c.push_back({"sinks", sinks, [](int64_t i, int64_t j) {
                 bool seen = j < 2 || i - j <= 5;
                 return Pair{seen, i - j <= 5 ? double(i - j) : double(std::min<int64_t>(i, 7) - j)};
               }});
  ExtensionSettings lambda;
  lambda.sinkTokens = 2, lambda.window = 6;
  c.push_back({"lambda", lambda, [](int64_t i, int64_t j) {
                 return Pair{j < 2 || i - j < 6, i - j >= 6 ? 6.0 : double(i - j)};
               }});
  ExtensionSettings selfExtend;
  selfExtend.window = 4, selfExtend.group = 3;  // W - W / G = 4 - 4/3: a fractional far query position
  c.push_back({"self-extend", selfExtend, [](int64_t i, int64_t j) {
                 double grouped = double(i / 3) + 4.0 - 4.0 / 3.0 - double(j / 3);
                 return Pair{true, i - j < 4 ? double(i - j) : grouped};
               }});
  ExtensionSettings rerope;
  rerope.window = 5;
  c.push_back({"rerope", rerope, [](int64_t i, int64_t j) { return Pair{true, double(std::min<int64_t>(i - j, 5))}; }});
  ExtensionSettings leaky;
  leaky.window = 5, leaky.leak = 4;
  c.push_back({"leaky-rerope", leaky, [](int64_t i, int64_t j) {
                 double d = double(i - j);
                 return Pair{true, d < 5 ? d : 5 + (d - 5) / 4};
               }});
  return c;
}

torch::Tensor runExtended(const ContextExtension& e, const torch::Tensor& q, const torch::Tensor& k,
                          const torch::Tensor& v, Rotary* rotary, AttentionBias* bias, int64_t queryBlock) {
  AttentionContext ctx;
  ctx.causal = true;
  ctx.rotary = rotary;
  ctx.bias = bias;
  ctx.extension = &e;
  ctx.queryBlock = queryBlock;
  return extendedAttention(q, k, v, ctx, 0);
}

}  // namespace

TEST_CASE("context extension attention equals the pair-by-pair reference (rotary and ALiBi)") {
  torch::manual_seed(3);
  auto q = torch::randn({1, H, T, D}, torch::kFloat64), k = torch::randn({1, H, T, D}, torch::kFloat64);
  auto v = torch::randn({1, H, T, D}, torch::kFloat64);
  Rotary rotary{D, 10000.0, 1.0};
  LinearBias alibi(makeLinearBiasSpec(PositionMethod::Alibi, H, true), false);
  std::vector<double> slopes = {0.0625, 0.00390625};  // 2^(-8h/H), H = 2
  for (const Case& c : cases())
    for (bool logn : {false, true})
      for (int64_t block : {int64_t(3), T}) {
        auto e = resolveContextExtension(c.name + (logn ? "+logn" : ""), c.settings, c.trainLength);
        auto scale = [&](int64_t i) { return logn ? std::max(1.0, std::log(double(i + 1)) / std::log(8.0)) : 1.0; };
        INFO(e.label() << ", query block " << block);
        auto gotRotary = runExtended(e, q, k, v, &rotary, nullptr, block)[0];
        CHECK(test::maxAbsDiff(gotRotary, reference(q, k, v, c.rule, true, {}, scale)) < 1e-5);
        auto gotAlibi = runExtended(e, q, k, v, nullptr, &alibi, block)[0];
        CHECK(test::maxAbsDiff(gotAlibi, reference(q, k, v, c.rule, false, slopes, scale)) < 1e-5);
      }
}

TEST_CASE("context extension: a window covering the sequence is plain attention") {
  torch::manual_seed(4);
  for (const char* pos : {"rotary", "alibi", "none"}) {
    Transformer model(test::tinyConfig(pos));
    model->eval();
    torch::NoGradGuard g;
    auto tokens = torch::randint(0, 50, {2, 24});
    auto plain = model->features(tokens);
    ExtensionSettings whole;
    whole.window = 24;
    for (const char* method : {"sinks", "lambda", "self-extend", "rerope", "leaky-rerope"}) {
      if (std::string(pos) == "none" && std::string(method) != "sinks" && std::string(method) != "lambda") continue;
      INFO(pos << " " << method);
      model->setContextExtension(resolveContextExtension(method, whole, 16));
      CHECK(test::maxAbsDiff(model->features(tokens), plain) < 1e-5);
    }
    model->setContextExtension({});
  }
}

TEST_CASE("context extension: probes see zero probability on hidden keys") {
  struct Keep : AttentionObserver {
    std::vector<torch::Tensor> blocks;
    void onProbabilities(int64_t, int64_t, const torch::Tensor& p) override { blocks.push_back(p.clone()); }
  } keep;
  torch::manual_seed(5);
  auto q = torch::randn({1, H, T, D}), k = torch::randn({1, H, T, D}), v = torch::randn({1, H, T, D});
  ExtensionSettings s;
  s.sinkTokens = 2, s.window = 5;
  auto e = resolveContextExtension("sinks", s, 8);
  AttentionContext ctx;
  ctx.causal = true;
  ctx.extension = &e;
  ctx.queryBlock = T;
  ctx.observer = &keep;
  extendedAttention(q, k, v, ctx, 0);
  REQUIRE(keep.blocks.size() == 1);
  auto p = keep.blocks[0][0][0];  // (T, T) of head 0
  for (int64_t i = 0; i < T; ++i)
    for (int64_t j = 0; j < T; ++j) CHECK((p[i][j].item<float>() > 0) == (j <= i && (j < 2 || i - j <= 5)));
}

TEST_CASE("context extension: a model refuses what has no meaning for it") {
  auto rerope = resolveContextExtension("rerope", {}, 16);
  CHECK_THROWS_AS(Transformer(test::tinyConfig("none"))->setContextExtension(rerope), std::invalid_argument);
  CHECK_THROWS_AS(Transformer(test::tinyConfig("t5"))->setContextExtension(rerope), std::invalid_argument);
  CHECK_THROWS_AS(Transformer(test::tinyConfig("alibi", "encoder"))->setContextExtension(rerope),
                  std::invalid_argument);
  CHECK_NOTHROW(Transformer(test::tinyConfig("t5"))->setContextExtension(resolveContextExtension("logn", {}, 16)));
  CHECK_NOTHROW(Transformer(test::tinyConfig("none"))->setContextExtension(resolveContextExtension("sinks", {}, 16)));
}
