// Whole-model properties: causality for every decoder position method, bidirectionality of
// encoder ALiBi variants, a uniform model's perplexity, output heads against their formulas,
// and the learned table's clear limit.
#include <catch2/catch.hpp>
#include <cmath>

#include "eval/perplexity.h"
#include "model/linear_nll.h"
#include "model/named_configs.h"
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

TEST_CASE("paper-wt103 at reduced width: parameter count by hand, adaptive input tied to the adaptive softmax") {
  ModelConfig c;
  applyNamedConfig("paper-wt103", c);
  c.vocabSize = 1000;
  c.layers = 2;
  c.dModel = 64;
  c.heads = 4;
  c.ffn = 128;
  c.adaptiveSoftmaxCutoffs = {100, 400};
  Transformer model(c);
  REQUIRE(!model->tokenEmbedding);
  REQUIRE(!model->lnFinal);  // no final LayerNorm
  // Per block: two LayerNorms (2 x 2 x 64), qkv 64 x 192 + 192, out 64 x 64 + 64, fc1 64 x 128 + 128,
  // fc2 128 x 64 + 64. Adaptive softmax (div 4): head (100 + 2 clusters) x 64, no bias; tail 0:
  // 64 -> 16 and 16 -> 300 words; tail 1: 64 -> 4 and 4 -> 600 words. Adaptive input: band 0's
  // 64 x 64 projection only; every other tensor is the softmax's.
  int64_t block = 2 * 2 * 64 + (64 * 192 + 192) + (64 * 64 + 64) + (64 * 128 + 128) + (128 * 64 + 64);
  int64_t softmax = 102 * 64 + (16 * 64 + 300 * 16) + (4 * 64 + 600 * 4);
  int64_t expected = 2 * block + softmax + 64 * 64;
  int64_t count = 0;
  for (const auto& p : model->parameters()) count += p.numel();
  CHECK(count == expected);

  auto& softmaxModule = *model->head->adaptive;
  auto tail = [&](int i, int layer) {
    return softmaxModule.tail[i]->as<torch::nn::Sequential>()->ptr(layer)->as<torch::nn::Linear>()->weight;
  };
  auto bands = model->adaptiveInput->bands();
  REQUIRE(bands.size() == 3);
  CHECK(bands[0].embedding.data_ptr() == softmaxModule.head->weight.data_ptr());  // shortlist rows 0..99
  CHECK(bands[0].embedding.size(0) == 100);
  CHECK(bands[1].embedding.data_ptr() == tail(0, 1).data_ptr());
  CHECK(bands[1].projection.data_ptr() == tail(0, 0).data_ptr());
  CHECK(bands[2].embedding.data_ptr() == tail(1, 1).data_ptr());
  CHECK(bands[2].projection.data_ptr() == tail(1, 0).data_ptr());

  // Input vectors against the formula: id 5 -> head row 5 @ W0^T; id 450 -> tail 1's row 50 @ tail 1's projection.
  {
    torch::NoGradGuard g;
    auto x = model->adaptiveInput(torch::tensor({{5, 450}}, torch::kLong));  // (1, 2, 64)
    auto shortlist = softmaxModule.head->weight[5].matmul(model->adaptiveInput->shortlistProjection->weight.t());
    auto rare = tail(1, 1)[50].matmul(tail(1, 0));
    CHECK(test::maxAbsDiff(x[0][0], shortlist) < 1e-6);
    CHECK(test::maxAbsDiff(x[0][1], rare) < 1e-6);
  }

  // Gradients reach the shared tensors from both sides: the input alone, then the output alone.
  model->train();
  for (const auto& p : model->parameters()) p.mutable_grad() = torch::Tensor();
  model->adaptiveInput(torch::tensor({{450}}, torch::kLong)).pow(2).sum().backward();
  CHECK(tail(1, 1).grad()[50].abs().sum().item<double>() > 0);
  CHECK(tail(1, 0).grad().abs().sum().item<double>() > 0);
  for (const auto& p : model->parameters()) p.mutable_grad() = torch::Tensor();
  model->eval();
  model->tokenNll(torch::randn({1, 64}), torch::tensor({450}, torch::kLong)).sum().backward();
  CHECK(tail(1, 1).grad()[50].abs().sum().item<double>() > 0);
  CHECK(tail(1, 0).grad().abs().sum().item<double>() > 0);
}
