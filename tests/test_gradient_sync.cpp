// GradientSync on a Gloo process group of one rank (the job torchrun makes with one process):
// buckets are all-reduced while backward runs, and a sum over one rank returns every gradient
// unchanged. The equivalence of 2 ranks with 1 is tests/distributed.sh.
#include <catch2/catch.hpp>

#include "dist/gradient_sync.h"
#include "model/transformer.h"
#include "one_rank_job.h"
#include "test_support.h"

using namespace xtrap;

// A build against a LibTorch without Gloo's headers (a pip wheel's) has no CPU process groups.
#ifdef XTRAP_WITH_GLOO

TEST_CASE("GradientSync all-reduces buckets during backward and keeps a one-rank sum exact") {
  test::OneRankJob job;
  DistGroup& group = job.group;
  REQUIRE(group.active());

  ModelConfig c = test::tinyConfig("alibi");
  c.vocabSize = 50;
  Transformer model(c);
  auto tokens = torch::randint(0, 50, {2, 9}, torch::kLong);  // (B, T + 1)
  auto loss = [&] {
    auto f = model->features(tokens.narrow(1, 0, 8));  // (B, T, d)
    return model->tokenNll(f.reshape({16, -1}), tokens.narrow(1, 1, 8).reshape({16})).mean();
  };
  // Reference gradients of one process.
  model->zero_grad();
  loss().backward();
  std::vector<torch::Tensor> expected;
  for (const auto& p : model->parameters()) expected.push_back(p.grad().clone());

  {
    GradientSync sync(group, model->parameters(), {}, /*bucketBytes=*/1024);  // many small buckets
    REQUIRE(sync.buckets() > 3);
    for (int step = 0; step < 2; ++step) {
      model->zero_grad();
      sync.start();
      loss().backward();
      sync.finish();
      // Every bucket but the one holding the first parameters (the token embedding, whose gradient
      // autograd produces last) was launched from a hook, before backward ended.
      CHECK(sync.bucketsOverlapped() >= sync.buckets() - 1);
      auto params = model->parameters();
      for (size_t i = 0; i < params.size(); ++i) CHECK(torch::equal(params[i].grad(), expected[i]));
    }
  }
  // The model outlives the GradientSync: its hooks are gone (a left-over hook would call into
  // the destroyed object, which the ASan build reports), and backward is a plain one again.
  model->zero_grad();
  loss().backward();
  auto params = model->parameters();
  for (size_t i = 0; i < params.size(); ++i) CHECK(torch::equal(params[i].grad(), expected[i]));
}

TEST_CASE("GradientSync sums an untied embedding's sparse gradient without a dense bucket for it") {
  test::OneRankJob job;
  DistGroup& group = job.group;
  REQUIRE(group.active());

  ModelConfig c = test::tinyConfig("alibi");
  c.adaptiveSoftmaxCutoffs = {20};  // the head has its own weights: the embedding is untied
  Transformer model(c);
  auto sparse = model->sparseGradientParameters();
  REQUIRE(sparse.size() == 1);
  REQUIRE(sparse[0].is_same(model->tokenEmbedding->weight));
  auto tokens = torch::randint(0, 50, {2, 9}, torch::kLong);  // (B, T + 1)
  auto loss = [&] {
    auto f = model->features(tokens.narrow(1, 0, 8));  // (B, T, d)
    return model->tokenNll(f.reshape({16, -1}), tokens.narrow(1, 1, 8).reshape({16})).mean();
  };
  auto dropGrads = [&] {
    for (auto& p : model->parameters()) p.mutable_grad() = torch::Tensor();
  };
  dropGrads();
  loss().backward();
  REQUIRE(model->tokenEmbedding->weight.grad().is_sparse());
  // The dense gradient: every row of the embedding a token of the batch, and nothing else.
  auto expected = model->tokenEmbedding->weight.grad().to_dense();
  auto used = std::get<0>(torch::_unique(tokens.narrow(1, 0, 8).reshape({-1})));
  CHECK(expected.abs().sum(1).nonzero().numel() == used.numel());

  int64_t embeddingBytes = model->tokenEmbedding->weight.numel() * 4;
  GradientSync sync(group, model->parameters(), sparse, /*bucketBytes=*/embeddingBytes);
  dropGrads();
  sync.start();
  loss().backward();
  sync.finish();
  auto summed = model->tokenEmbedding->weight.grad();
  REQUIRE(summed.is_sparse());
  CHECK(summed.is_coalesced());
  CHECK(torch::equal(summed.to_dense(), expected));
}
#endif
