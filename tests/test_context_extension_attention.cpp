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
#include "model/position/fire_bias.h"
#include "model/position/kerple_bias.h"
#include "model/position/linear_bias.h"
#include "model/position/rotary.h"
#include "model/position/t5_bias.h"
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

// How the reference sees pair (i, j): whether it is seen, the rotary angle's distance (signed,
// i - j in a plain model) and each head's bias.
struct PairView {
  bool seen;
  double distance;
};
using PairViewOf = std::function<PairView(int64_t i, int64_t j)>;
using BiasOf = std::function<double(int64_t h, int64_t i, int64_t j)>;  // 0 without a bias

// The reference output (H, T, D) for q, k, v (1, H, T, D) float64, logits scaled q already.
torch::Tensor reference(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, const PairViewOf& view,
                        bool rotary, const BiasOf& bias, const std::function<double(int64_t)>& qScale) {
  auto out = torch::zeros({H, T, D}, torch::kFloat64);
  for (int64_t h = 0; h < H; ++h)
    for (int64_t i = 0; i < T; ++i) {
      std::vector<double> logits(T, -std::numeric_limits<double>::infinity());
      for (int64_t j = 0; j < T; ++j) {
        PairView p = view(i, j);
        if (!p.seen) continue;
        auto qi = q[0][h][i] * qScale(i);
        double dot = 0;
        if (rotary) {
          auto tq = turned(qi, p.distance);
          for (int64_t c = 0; c < D; ++c) dot += tq[size_t(c)] * k[0][h][j][c].item<double>();
        } else {
          dot = (qi * k[0][h][j]).sum().item<double>();
        }
        logits[size_t(j)] = dot + bias(h, i, j);
      }
      double top = *std::max_element(logits.begin(), logits.end()), sum = 0;
      for (double& l : logits) sum += (l = std::exp(l - top));
      for (int64_t j = 0; j < T; ++j) out[h][i] += v[0][h][j] * (logits[size_t(j)] / sum);
    }
  return out;
}

// A decoder's view of a method's rule: future keys unseen.
PairViewOf causalView(const PairRule& rule) {
  return [rule](int64_t i, int64_t j) {
    if (j > i) return PairView{false, 0.0};
    Pair p = rule(i, j);
    return PairView{p.seen, p.distance};
  };
}

// An encoder's (docs/position-methods.md): a future pair takes the past rule at distance j - i,
// seen from the other side.
PairViewOf mirroredView(const PairRule& rule) {
  return [rule](int64_t i, int64_t j) {
    Pair p = j <= i ? rule(i, j) : rule(j, i);
    return PairView{p.seen, j <= i ? p.distance : -p.distance};
  };
}

// ALiBi's -m_h |d'|, slopes 2^(-8h/H) for H = 2.
double alibiBias(int64_t h, double distance) { return -(h == 0 ? 0.0625 : 0.00390625) * std::abs(distance); }

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
                          const torch::Tensor& v, Rotary* rotary, AttentionBias* bias, int64_t queryBlock,
                          bool causal = true) {
  AttentionContext ctx;
  ctx.causal = causal;
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
  auto noBias = [](int64_t, int64_t, int64_t) { return 0.0; };
  for (const Case& c : cases())
    for (bool logn : {false, true})
      for (int64_t block : {int64_t(3), T}) {
        auto e = resolveContextExtension(c.name + (logn ? "+logn" : ""), c.settings, c.trainLength);
        auto scale = [&](int64_t i) { return logn ? std::max(1.0, std::log(double(i + 1)) / std::log(8.0)) : 1.0; };
        INFO(e.label() << ", query block " << block);
        auto view = causalView(c.rule);
        auto gotRotary = runExtended(e, q, k, v, &rotary, nullptr, block)[0];
        CHECK(test::maxAbsDiff(gotRotary, reference(q, k, v, view, true, noBias, scale)) < 1e-5);
        auto gotAlibi = runExtended(e, q, k, v, nullptr, &alibi, block)[0];
        auto alibiOf = [&](int64_t h, int64_t i, int64_t j) { return alibiBias(h, view(i, j).distance); };
        CHECK(test::maxAbsDiff(gotAlibi, reference(q, k, v, view, false, alibiOf, scale)) < 1e-5);
      }
}

TEST_CASE("context extension in encoders: future pairs mirror the past rule, logn's n is the window") {
  torch::manual_seed(6);
  auto q = torch::randn({1, H, T, D}, torch::kFloat64), k = torch::randn({1, H, T, D}, torch::kFloat64);
  auto v = torch::randn({1, H, T, D}, torch::kFloat64);
  Rotary rotary{D, 10000.0, 1.0};
  LinearBias alibi(makeLinearBiasSpec(PositionMethod::Alibi, H, false), false);  // symmetric -m|i-j|
  auto noBias = [](int64_t, int64_t, int64_t) { return 0.0; };
  for (const Case& c : cases()) {
    if (c.name == "sinks" || c.name == "lambda") continue;  // decoders only
    for (bool logn : {false, true})
      for (int64_t block : {int64_t(5), T}) {
        auto e = resolveContextExtension(c.name + (logn ? "+logn" : ""), c.settings, c.trainLength);
        double n = logn ? std::log(double(T)) / std::log(8.0) : 1.0;  // every query sees T keys
        auto scale = [&](int64_t) { return n; };
        INFO(e.label() << ", query block " << block);
        auto view = mirroredView(c.rule);
        auto gotRotary = runExtended(e, q, k, v, &rotary, nullptr, block, false)[0];
        CHECK(test::maxAbsDiff(gotRotary, reference(q, k, v, view, true, noBias, scale)) < 1e-5);
        auto gotAlibi = runExtended(e, q, k, v, nullptr, &alibi, block, false)[0];
        auto alibiOf = [&](int64_t h, int64_t i, int64_t j) { return alibiBias(h, view(i, j).distance); };
        CHECK(test::maxAbsDiff(gotAlibi, reference(q, k, v, view, false, alibiOf, scale)) < 1e-5);
      }
  }
}

TEST_CASE("context extension: T5, KERPLE-log and FIRE take their bias at the far positions") {
  // sinks S = 2, W = 5 and rerope w = 5 move pairs to whole positions: the reference asks the
  // provider for the bias of the one pair (p_q, p_k) through block(), the provider's own trained
  // computation; KERPLE also at Self-Extend's fractional positions, by its formula.
  torch::manual_seed(7);
  auto q = torch::randn({1, H, T, D}), k = torch::randn({1, H, T, D}), v = torch::randn({1, H, T, D});
  auto toDouble = [](const torch::Tensor& t) { return t.to(torch::kFloat64); };
  T5Bias t5(H, 32, 128, false);
  KerpleLogBias kerple(H);
  FireBias fire(H, 8.0);
  struct Moved {
    const char* name;
    ExtensionSettings settings;
    std::function<std::pair<int64_t, int64_t>(int64_t, int64_t)> positions;  // (p_q(i), p_k(j)) of a seen pair
    std::function<bool(int64_t, int64_t)> seen;
  };
  ExtensionSettings sinks, rerope;
  sinks.sinkTokens = 2, sinks.window = 5, rerope.window = 5;
  std::vector<Moved> moved = {
      {"sinks", sinks,
       [](int64_t i, int64_t j) {
         return i - j <= 5 ? std::make_pair(i, j) : std::make_pair(std::min<int64_t>(i, 7), j);
       },
       [](int64_t i, int64_t j) { return j <= i && (j < 2 || i - j <= 5); }},
      {"rerope", rerope,
       [](int64_t i, int64_t j) { return i - j < 5 ? std::make_pair(i, j) : std::make_pair(int64_t(5), int64_t(0)); },
       [](int64_t i, int64_t j) { return j <= i; }},
  };
  for (AttentionBias* provider : std::vector<AttentionBias*>{&t5, &kerple, &fire})
    for (const Moved& m : moved) {
      auto e = resolveContextExtension(m.name, m.settings, 8);
      torch::NoGradGuard g;
      auto view = [&](int64_t i, int64_t j) { return PairView{m.seen(i, j), 0.0}; };
      auto biasOf = [&](int64_t h, int64_t i, int64_t j) {
        auto [pq, pk] = m.positions(i, j);
        return provider->block(pq, pq + 1, pk, pk + 1)[h][0][0].item<double>();
      };
      INFO(m.name);
      auto got = runExtended(e, q, k, v, nullptr, provider, 4)[0];
      CHECK(test::maxAbsDiff(toDouble(got), reference(toDouble(q), toDouble(k), toDouble(v), view, false, biasOf,
                                                      [](int64_t) { return 1.0; })) < 1e-4);
    }
  // Self-Extend W = 4, G = 3: far distance floor(i/3) + 4 - 4/3 - floor(j/3).
  ExtensionSettings selfExtend;
  selfExtend.window = 4, selfExtend.group = 3;
  auto e = resolveContextExtension("self-extend", selfExtend, 8);
  torch::NoGradGuard g;
  auto r1 = toDouble(kerple.r1()), r2 = toDouble(kerple.r2());
  auto view = [](int64_t i, int64_t j) { return PairView{j <= i, 0.0}; };
  auto kerpleOf = [&](int64_t h, int64_t i, int64_t j) {
    double d = i - j < 4 ? double(i - j) : double(i / 3) + 4.0 - 4.0 / 3.0 - double(j / 3);
    return -r1[h].item<double>() * std::log1p(r2[h].item<double>() * d);
  };
  auto got = runExtended(e, q, k, v, nullptr, &kerple, 4)[0];
  CHECK(test::maxAbsDiff(toDouble(got), reference(toDouble(q), toDouble(k), toDouble(v), view, false, kerpleOf,
                                                  [](int64_t) { return 1.0; })) < 1e-4);
}

TEST_CASE("context extension: BiALiBi's pairs with the first token keep their learned bias") {
  torch::manual_seed(8);
  auto q = torch::randn({1, H, T, D}), k = torch::randn({1, H, T, D}), v = torch::randn({1, H, T, D});
  LinearBias bialibi(makeLinearBiasSpec(PositionMethod::BiAlibi, H, false), true);
  ExtensionSettings rerope;
  rerope.window = 3;
  auto e = resolveContextExtension("rerope", rerope, 8);
  torch::NoGradGuard g;
  auto past = bialibi.slopePast().to(torch::kFloat64), future = bialibi.slopeFuture().to(torch::kFloat64);
  auto first = bialibi.firstTokenBias().to(torch::kFloat64);
  auto view = [](int64_t, int64_t) { return PairView{true, 0.0}; };
  auto biasOf = [&](int64_t h, int64_t i, int64_t j) {
    if (i == 0 || j == 0) return first[h].item<double>();
    double d = std::min<double>(std::abs(double(i - j)), 3.0);
    return -(j < i ? past[h] : future[h]).item<double>() * d;
  };
  auto toDouble = [](const torch::Tensor& t) { return t.to(torch::kFloat64); };
  auto got = runExtended(e, q, k, v, nullptr, &bialibi, 4, false)[0];
  CHECK(test::maxAbsDiff(toDouble(got), reference(toDouble(q), toDouble(k), toDouble(v), view, false, biasOf,
                                                  [](int64_t) { return 1.0; })) < 1e-4);
}

TEST_CASE("context extension: a window covering the sequence is plain attention") {
  torch::manual_seed(4);
  const std::vector<std::pair<std::string, std::string>> models = {
      {"rotary", "decoder"},     {"alibi", "decoder"}, {"none", "decoder"},          {"t5", "decoder"},
      {"kerple-log", "decoder"}, {"fire", "decoder"},  {"rotary", "encoder"},        {"alibi", "encoder"},
      {"bialibi", "encoder"},    {"t5", "encoder"},    {"alibi-onesided", "encoder"}};
  for (const auto& [pos, arch] : models) {
    Transformer model(test::tinyConfig(pos, arch));
    model->eval();
    torch::NoGradGuard g;
    auto tokens = torch::randint(0, 50, {2, 24});
    auto plain = model->features(tokens);
    ExtensionSettings whole;
    whole.window = 24;
    for (std::string method : {"sinks", "lambda", "self-extend", "rerope", "leaky-rerope"}) {
      bool maskOnly = method == "sinks" || method == "lambda";
      if ((pos == "none" && !maskOnly) || (arch == "encoder" && maskOnly)) continue;
      INFO(pos << " " << arch << " " << method);
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
  auto rerope = resolveContextExtension("rerope", {}, 16), sinks = resolveContextExtension("sinks", {}, 16);
  auto logn = resolveContextExtension("logn", {}, 16);
  CHECK_THROWS_AS(Transformer(test::tinyConfig("none"))->setContextExtension(rerope), std::invalid_argument);
  CHECK_THROWS_AS(Transformer(test::tinyConfig("sinusoidal"))->setContextExtension(rerope), std::invalid_argument);
  CHECK_THROWS_AS(Transformer(test::tinyConfig("learned"))->setContextExtension(sinks), std::invalid_argument);
  CHECK_THROWS_AS(Transformer(test::tinyConfig("alibi", "encoder"))->setContextExtension(sinks), std::invalid_argument);
  CHECK_THROWS_AS(Transformer(test::tinyConfig("rotary", "encoder"))
                      ->setContextExtension(resolveContextExtension("lambda", {}, 16)),
                  std::invalid_argument);
  auto windowed = test::tinyConfig("rotary");
  windowed.attentionWindow = 8;
  CHECK_THROWS_AS(Transformer(windowed)->setContextExtension(rerope), std::invalid_argument);
  CHECK_NOTHROW(Transformer(test::tinyConfig("t5"))->setContextExtension(rerope));
  CHECK_NOTHROW(Transformer(test::tinyConfig("alibi", "encoder"))->setContextExtension(rerope));
  CHECK_NOTHROW(Transformer(test::tinyConfig("sinusoidal"))->setContextExtension(logn));
  CHECK_NOTHROW(Transformer(test::tinyConfig("none"))->setContextExtension(sinks));
}
