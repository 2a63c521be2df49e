// Whole-model properties: causality for every decoder position method, bidirectionality of
// encoder ALiBi variants, a uniform model's perplexity, output heads against their formulas,
// and the learned table's clear limit.
#include <catch2/catch.hpp>
#include <cmath>

#include "eval/perplexity.h"
#include "model/linear_nll.h"
#include "model/transformer.h"
#include "test_support.h"

using namespace xtrap;
using test::tinyConfig;

TEST_CASE("decoder output at t does not change when tokens after t change, for every --pos") {
  for (std::string pos : {"none", "sinusoidal", "learned", "rotary", "t5", "alibi", "kerple-log", "fire"}) {
    INFO("pos " << pos);
    Transformer model(tinyConfig(pos));
    model->eval();
    torch::NoGradGuard g;
    auto x = torch::randint(0, 50, {2, 12}, torch::kLong);
    auto y = x.clone();
    y.narrow(1, 7, 5).random_(0, 50);  // change tokens 7..11
    for (int64_t block : {0, 4}) {
      auto a = model->features(x, {block, nullptr}), b = model->features(y, {block, nullptr});
      CHECK(test::maxAbsDiff(a.narrow(1, 0, 7), b.narrow(1, 0, 7)) < 1e-6);
      CHECK(test::maxAbsDiff(a.narrow(1, 7, 5), b.narrow(1, 7, 5)) > 1e-4);
    }
  }
}

TEST_CASE("encoder output at i changes when a later token changes (ALiBi variants and others)") {
  for (std::string pos : {"alibi", "alibi-offset", "alibi-onesided", "alibi-learned", "bialibi", "t5", "rotary",
                          "sinusoidal", "learned", "none"}) {
    INFO("pos " << pos);
    Transformer model(tinyConfig(pos, "encoder"));
    model->eval();
    torch::NoGradGuard g;
    auto x = torch::randint(0, 50, {1, 12}, torch::kLong);
    auto y = x.clone();
    y[0][10] = (x[0][10].item<int64_t>() + 1) % 50;
    auto a = model->features(x), b = model->features(y);
    CHECK(test::maxAbsDiff(a.narrow(1, 0, 5), b.narrow(1, 0, 5)) > 1e-5);
  }
}

TEST_CASE("a uniform model scores perplexity = vocabulary size") {
  auto c = tinyConfig("alibi");
  c.vocabSize = 37;
  Transformer model(c);
  torch::NoGradGuard g;
  model->lnFinal->weight.zero_();  // features become 0, so every logit is 0
  model->lnFinal->bias.zero_();
  std::vector<int32_t> stream(500);
  for (size_t i = 0; i < stream.size(); ++i) stream[i] = int32_t((i * 7) % 37);
  ScoreOptions opt;
  opt.Lvalid = 16;
  opt.eos = 0;
  auto totals = scoreDecoder(model, stream, opt);
  CHECK(totals.tokens == 500);  // every token, the first from an <eos> context
  CHECK(std::exp(totals.meanNll()) == Approx(37.0).epsilon(1e-6));
}

TEST_CASE("output heads follow their formulas") {
  torch::manual_seed(2);
  auto x = torch::randn({5, 16});
  SECTION("lm: x E^T (tied)") {
    Transformer m(tinyConfig("alibi"));
    CHECK(test::maxAbsDiff(m->logits(x), x.matmul(m->tokenEmbedding->weight.t())) < 1e-5);
  }
  SECTION("clap: beta * x . normalize(E)^T, inputs embedded with the same normalised rows") {
    auto c = tinyConfig("alibi-offset", "encoder");
    c.head = "clap";
    c.clapBeta = 2.5;
    Transformer m(c);
    auto E = m->tokenEmbedding->weight;
    auto En = E / E.norm(2, 1, true);
    CHECK(test::maxAbsDiff(m->logits(x), 2.5 * x.matmul(En.t())) < 1e-5);
    CHECK(m->head->beta.requires_grad());
  }
  SECTION("roberta: LayerNorm(GELU(dense x)) E^T + bias") {
    auto c = tinyConfig("learned", "encoder");
    c.head = "roberta";
    Transformer m(c);
    torch::NoGradGuard g;
    m->head->bias.uniform_();
    auto h = torch::gelu(m->head->dense(x));
    auto mu = h.mean(-1, true), var = h.var(-1, false, true);
    auto normed = (h - mu) / torch::sqrt(var + 1e-5);  // LayerNorm at init: weight 1, bias 0
    CHECK(test::maxAbsDiff(m->logits(x), normed.matmul(m->tokenEmbedding->weight.t()) + m->head->bias) < 1e-4);
  }
  SECTION("adaptive softmax: a proper distribution over the vocabulary") {
    auto c = tinyConfig("alibi");
    c.adaptiveSoftmaxCutoffs = {10, 30};
    Transformer m(c);
    torch::NoGradGuard g;
    CHECK(test::maxAbsDiff(m->logits(x).exp().sum(-1), torch::ones({5})) < 1e-5);
    auto targets = torch::tensor({0, 9, 10, 31, 49}, torch::kLong);
    auto expected = -m->logits(x).gather(1, targets.unsqueeze(1)).squeeze(1);
    CHECK(test::maxAbsDiff(m->tokenNll(x, targets), expected) < 1e-5);
  }
}

TEST_CASE("learned positions beyond the table fail with a clear message") {
  auto c = tinyConfig("learned");
  c.maxPositions = 16;
  Transformer m(c);
  CHECK_THROWS_WITH(m->features(torch::zeros({1, 17}, torch::kLong)),
                    Catch::Contains("length 17 exceeds the table of 16 positions"));
}

TEST_CASE("linearNll in row blocks equals log-softmax of the full logits, values and gradients") {
  torch::manual_seed(3);
  int64_t N = 37, K = 6, V = 11;  // 11 classes in blocks of 3: three full blocks and one of 2
  auto x = torch::randn({N, K}, torch::kFloat64).requires_grad_();
  auto w = torch::randn({V, K}, torch::kFloat64).requires_grad_();
  auto b = torch::randn({V}, torch::kFloat64).requires_grad_();
  auto targets = torch::randint(0, V, {N}, torch::kInt64);
  auto rowWeights = torch::rand({N}, torch::kFloat64);  // a loss that weighs rows differently
  for (bool withBias : {false, true}) {
    INFO("bias " << withBias);
    auto logits = x.matmul(w.t()) + (withBias ? b : torch::zeros({V}, torch::kFloat64));
    auto expected = -torch::log_softmax(logits, 1).gather(1, targets.unsqueeze(1)).squeeze(1);
    auto expectedGrads = torch::autograd::grad({(expected * rowWeights).sum()}, {x, w, b}, {}, false, false, true);
    auto got = linearNll(x, w, withBias ? b : torch::Tensor(), targets, 3 * N);
    CHECK(got.scalar_type() == torch::kFloat32);
    CHECK(torch::allclose(got.to(torch::kFloat64), expected, 1e-5, 1e-5));
    auto grads =
        torch::autograd::grad({(got.to(torch::kFloat64) * rowWeights).sum()}, {x, w, b}, {}, false, false, true);
    CHECK(torch::allclose(grads[0], expectedGrads[0], 1e-5, 1e-5));
    CHECK(torch::allclose(grads[1], expectedGrads[1], 1e-5, 1e-5));
    if (withBias) CHECK(torch::allclose(grads[2], expectedGrads[2], 1e-5, 1e-5));
  }
}

TEST_CASE("the adaptive softmax NLL equals LibTorch's AdaptiveLogSoftmaxWithLoss on the same parameters") {
  torch::manual_seed(5);
  ModelConfig c;
  c.dModel = 16;
  c.vocabSize = 50;
  c.adaptiveSoftmaxCutoffs = {10, 30};
  OutputHead head(c, torch::randn({50, 16}));
  auto x = torch::randn({40, 16}, torch::kFloat32).requires_grad_();
  auto targets = torch::randint(0, 50, {40}, torch::kInt64);
  auto expected = -head->adaptive->forward(x, targets).output;  // LibTorch's own forward
  auto expectedGrad = torch::autograd::grad({expected.sum()}, {x, head->adaptive->head->weight})[1];
  auto got = head->nll(x, targets);
  CHECK(torch::allclose(got, expected, 1e-5, 1e-5));
  auto gotGrad = torch::autograd::grad({got.sum()}, {x, head->adaptive->head->weight})[1];
  CHECK(torch::allclose(gotGrad, expectedGrad, 1e-5, 1e-5));
}
