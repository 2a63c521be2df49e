// Context extension's closed forms (model/context_extension.h) on small cases worked out by hand
// from the papers' formulas: which keys a query sees, which pairs move, and the distance each
// moved pair gets (far query position - far key position).
#include <catch2/catch.hpp>
#include <cmath>
#include <stdexcept>

#include "model/context_extension.h"

using namespace xtrap;

namespace {

double farDistance(const ContextExtension& e, int64_t i, int64_t j) {
  return e.farQueryPosition(i) - e.farKeyPosition(j);
}

// The distance the pair (i, j) is seen at: the true one in the near region.
double seenDistance(const ContextExtension& e, int64_t i, int64_t j) {
  return e.far(i, j) ? farDistance(e, i, j) : double(i - j);
}

}  // namespace

TEST_CASE("context extension: Self-Extend with W = 4, G = 2 at length 16") {
  ExtensionSettings s;
  s.window = 4;
  s.group = 2;
  auto e = resolveContextExtension("self-extend", s, 8);
  // Query 15: keys 0..11 are grouped, floor(15/2) + 4 - 4/2 = 9 against floor(j/2); 12..15 keep i - j.
  const double expected[16] = {9, 9, 8, 8, 7, 7, 6, 6, 5, 5, 4, 4, 3, 2, 1, 0};
  for (int64_t j = 0; j < 16; ++j) {
    CHECK(e.visible(15, j));
    CHECK(seenDistance(e, 15, j) == expected[j]);
  }
  // Query 10, key 3: floor(10/2) + 2 - floor(3/2) = 6; key 7 (i - j = 3 < W) is near.
  CHECK(seenDistance(e, 10, 3) == 6);
  CHECK_FALSE(e.far(10, 7));
  CHECK(e.far(10, 6));
  CHECK(seenDistance(e, 10, 6) == 4);  // 5 + 2 - 3
  // Every key is seen: one range.
  CHECK(e.keyRanges(8, 16) == std::vector<std::pair<int64_t, int64_t>>{{0, 16}});
  CHECK(e.label() == "self-extend G=2 W=4");
}

TEST_CASE("context extension: sinks S = 2, W = 3 (StreamingLLM's cache of 5 when a token arrives)") {
  ExtensionSettings s;
  s.sinkTokens = 2;
  s.window = 3;
  auto e = resolveContextExtension("sinks", s, 8);
  // Query 7 sees the sinks 0, 1 and keys 4..7; 2 and 3 are evicted.
  const bool seen[8] = {true, true, false, false, true, true, true, true};
  for (int64_t j = 0; j < 8; ++j) CHECK(e.visible(7, j) == seen[j]);
  // In the cache [0, 1, 4, 5, 6] + the query at cache position 5: the sinks at distances 5 and 4.
  CHECK(seenDistance(e, 7, 0) == 5);
  CHECK(seenDistance(e, 7, 1) == 4);
  CHECK(seenDistance(e, 7, 4) == 3);
  // Before the cache fills (query 4: keys 0..4 all kept) the true distances.
  for (int64_t j = 0; j <= 4; ++j) {
    CHECK(e.visible(4, j));
    CHECK(seenDistance(e, 4, j) == 4 - j);
  }
  CHECK_FALSE(e.visible(3, 4));  // the future
  // Queries 6 and 7 together see keys [0, 2) and [3, 8).
  CHECK(e.keyRanges(6, 8) == std::vector<std::pair<int64_t, int64_t>>{{0, 2}, {3, 8}});
  CHECK(e.keyRanges(0, 4) == std::vector<std::pair<int64_t, int64_t>>{{0, 4}});
  CHECK(e.label() == "sinks S=2 W=3");
}

TEST_CASE("context extension: lambda with 2 global keys, L_local = 4, limit 4") {
  ExtensionSettings s;
  s.sinkTokens = 2;
  s.window = 4;
  auto e = resolveContextExtension("lambda", s, 4);
  // Query 9: the global keys 0, 1 and the last 4 keys 6..9.
  for (int64_t j = 0; j < 10; ++j) CHECK(e.visible(9, j) == (j < 2 || j >= 6));
  CHECK(seenDistance(e, 9, 0) == 4);  // the limit
  CHECK(seenDistance(e, 9, 1) == 4);
  CHECK(seenDistance(e, 9, 6) == 3);
  CHECK(e.keyRanges(8, 10) == std::vector<std::pair<int64_t, int64_t>>{{0, 2}, {5, 10}});
  CHECK(e.label() == "lambda global=2 local=4 limit=4");
}

TEST_CASE("context extension: ReRoPE and leaky ReRoPE") {
  ExtensionSettings s;
  s.window = 3;
  auto re = resolveContextExtension("rerope", s, 8);
  CHECK(seenDistance(re, 10, 1) == 3);
  CHECK(seenDistance(re, 10, 7) == 3);
  CHECK(seenDistance(re, 10, 8) == 2);
  s.leak = 4;
  auto leaky = resolveContextExtension("leaky-rerope", s, 8);
  // i - j = 9: 3 + (9 - 3) / 4 = 4.5 (query at (10 + 3 * 3) / 4 = 4.75, key at 1 / 4).
  CHECK(leaky.farQueryPosition(10) == Approx(4.75));
  CHECK(leaky.farKeyPosition(1) == Approx(0.25));
  CHECK(seenDistance(leaky, 10, 1) == Approx(4.5));
  CHECK(seenDistance(leaky, 10, 7) == Approx(3.0));
  CHECK(leaky.label() == "leaky-rerope w=3 k=4");
}

TEST_CASE("context extension: logn scales query i by max(1, ln(i + 1) / ln(L_train))") {
  auto e = resolveContextExtension("logn", {}, 8);
  CHECK(e.queryScale(3) == 1.0);
  CHECK(e.queryScale(7) == Approx(1.0));
  CHECK(e.queryScale(15) == Approx(4.0 / 3.0));  // ln 16 / ln 8
  CHECK(e.queryScale(63) == Approx(2.0));
  CHECK_FALSE(e.hasFarPositions());
  CHECK(e.label() == "logn");
  auto both = resolveContextExtension("rerope+logn", {}, 64);
  CHECK(both.logn);
  CHECK(both.method == ExtensionMethod::ReRope);
  CHECK(both.label() == "rerope w=8 + logn");
  CHECK_FALSE(resolveContextExtension("none", {}, 64).active());
}

TEST_CASE("context extension: defaults from L_train and the papers") {
  auto sinks = resolveContextExtension("sinks", {}, 128);
  CHECK(sinks.sinkTokens == 4);
  CHECK(sinks.window == 124);
  auto lambda = resolveContextExtension("lambda", {}, 128);
  CHECK(lambda.sinkTokens == 10);
  CHECK(lambda.window == 128);
  CHECK(lambda.distanceLimit == 128);
  auto se = resolveContextExtension("self-extend", {}, 128);
  CHECK(se.group == 8);
  CHECK(se.window == 32);
  CHECK(resolveContextExtension("rerope", {}, 128).window == 16);
  CHECK(resolveContextExtension("leaky-rerope", {}, 128).leak == 16.0);
}

TEST_CASE("context extension: bad names and settings are one-line errors") {
  CHECK_THROWS_AS(resolveContextExtension("streaming", {}, 128), std::invalid_argument);
  CHECK_THROWS_AS(resolveContextExtension("none+logn", {}, 128), std::invalid_argument);
  CHECK_THROWS_AS(resolveContextExtension("logn+logn", {}, 128), std::invalid_argument);
  ExtensionSettings g;
  g.group = 1;
  CHECK_THROWS_AS(resolveContextExtension("self-extend", g, 128), std::invalid_argument);
  ExtensionSettings k;
  k.leak = 1;
  CHECK_THROWS_AS(resolveContextExtension("leaky-rerope", k, 128), std::invalid_argument);
  ExtensionSettings w;
  w.sinkTokens = 128;  // no room left for a window
  CHECK_THROWS_AS(resolveContextExtension("sinks", w, 128), std::invalid_argument);
  // A setting no listed method reads is refused.
  CHECK_THROWS_AS(checkExtensionSettingsUsed({"none", "rerope"}, g), std::invalid_argument);
  CHECK_NOTHROW(checkExtensionSettingsUsed({"rerope", "self-extend"}, g));
  CHECK_THROWS_WITH(checkExtensionSettingsUsed({"sinks"}, k), "--extend-leak applies to --extend leaky-rerope only");
}
