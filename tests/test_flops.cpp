#include <catch2/catch.hpp>

#include "model/flops.h"

using namespace xtrap;

namespace {
ModelConfig tiny() {
  ModelConfig c;
  c.layers = 2;
  c.dModel = 16;
  c.heads = 2;
  c.ffn = 64;
  c.contextLength = 8;
  c.vocabSize = 100;
  return c;
}
}  // namespace

TEST_CASE("body FLOPs match a hand count", "[flops]") {
  // Per layer and token: qkv 2*16*48 = 1536, out 2*16*16 = 512, fc1 + fc2 2*2*16*64 = 4096;
  // attention 2 * (2*8*16) = 512 per token. Per layer: 8 * (6144 + 512) = 53248; 2 layers.
  REQUIRE(bodyForwardFlops(tiny(), 8) == Approx(106496.0));
}

TEST_CASE("full-softmax head and training step", "[flops]") {
  ModelConfig c = tiny();
  REQUIRE(headForwardFlopsPerRow(c) == Approx(2.0 * 16 * 100));
  // 3 sequences, every position scored, forward x 3.
  REQUIRE(trainStepFlops(c, 3, 0.15) == Approx(3.0 * (3 * 106496.0 + 24 * 3200.0)));
  c.head = "roberta";
  REQUIRE(headForwardFlopsPerRow(c) == Approx(3200.0 + 512.0));
}

TEST_CASE("encoder training scores only the masked fraction", "[flops]") {
  ModelConfig c = tiny();
  c.arch = "encoder";
  REQUIRE(trainStepFlops(c, 2, 0.25) == Approx(3.0 * (2 * 106496.0 + 4 * 3200.0)));
}

TEST_CASE("adaptive softmax counts the head and the tails by target share", "[flops]") {
  ModelConfig c = tiny();
  c.adaptiveSoftmaxCutoffs = {10, 40};
  // Head: 2*16*(10 + 2) = 384. Tail 0: 16 -> 4 -> 30 words; tail 1: 16 -> 1 -> 60 words.
  REQUIRE(headForwardFlopsPerRow(c) == Approx(384.0));
  std::vector<int32_t> targets = {0, 5, 12, 39, 40, 99, 1, 2};  // 2 in tail 0, 2 in tail 1
  auto shares = adaptiveClusterShares(c, targets);
  REQUIRE(shares.size() == 2);
  REQUIRE(shares[0] == Approx(0.25));
  REQUIRE(shares[1] == Approx(0.25));
  double tail0 = 2.0 * (16 * 4 + 4 * 30), tail1 = 2.0 * (16 * 1 + 1 * 60);
  REQUIRE(headForwardFlopsPerRow(c, shares) == Approx(384.0 + 0.25 * tail0 + 0.25 * tail1));
}
