// Extend, then adapt (train --init, train/init_from_run.h): each interpolation is baked into the
// adapted configuration as the papers define it (hand-computed bases, slopes and scalings); the
// adapted model computes what the source computes under eval's --interp at the same factor (two
// routes: the baked configuration against applyInterpolation); the trainer starts from the
// source's weights, records where it came from, and `eval` of the adapted run applies the
// transform without flags; what has no meaning is refused.
#include <catch2/catch.hpp>
#include <cmath>

#include "eval/model_interpolation.h"
#include "model/position/linear_bias.h"
#include "run/checkpoint.h"
#include "test_support.h"
#include "train/init_from_run.h"

using namespace xtrap;

TEST_CASE("adapted configurations bake each interpolation as its paper defines it") {
  ModelConfig rotary = test::tinyConfig("rotary");  // L = 16, head dim 16 / 4 = 4, all rotated
  auto pi = adaptedModelConfig(rotary, 64, Interp::Linear, 4.0);
  CHECK(pi.contextLength == 64);
  CHECK(pi.ropeScaling.type == "linear");
  CHECK(pi.ropeScaling.factor == 4.0);
  CHECK(pi.rotaryBase == 10000.0);
  auto ntk = adaptedModelConfig(rotary, 64, Interp::Ntk, 4.0);
  CHECK(ntk.rotaryBase == Approx(10000.0 * 16.0));  // base a^(d / (d - 2)) = 10000 * 4^2 for d = 4
  CHECK(ntk.ropeScaling.isDefault());
  auto yarn = adaptedModelConfig(rotary, 64, Interp::Yarn, 4.0);
  CHECK(yarn.ropeScaling.type == "yarn");
  CHECK(yarn.ropeScaling.factor == 4.0);
  CHECK(yarn.ropeScaling.originalMaxPositions == 16);

  // NTK-ALiBi, H = 4: slopes 2^-2, 2^-4, 2^-6, 2^-8 divided by a^((h - 1) / (H - 1)).
  Transformer ntkAlibi(adaptedModelConfig(test::tinyConfig("alibi"), 64, Interp::Ntk, 8.0));
  auto slopes = ntkAlibi->linearBias()->slopePast();
  for (int64_t h = 0; h < 4; ++h)
    CHECK(slopes[h].item<double>() == Approx(std::pow(2.0, -2.0 * double(h + 1)) / std::pow(8.0, double(h) / 3.0)));
  Transformer linearAlibi(adaptedModelConfig(test::tinyConfig("alibi"), 64, Interp::Linear, 8.0));
  CHECK(linearAlibi->linearBias()->slopePast()[0].item<double>() == Approx(0.25 / 8.0));

  auto refused = [](const ModelConfig& m, Interp interp) {
    CHECK_THROWS_AS(adaptedModelConfig(m, 64, interp, 4.0), std::invalid_argument);
  };
  refused(rotary, Interp::DynamicNtk);
  refused(test::tinyConfig("alibi"), Interp::Yarn);
  refused(test::tinyConfig("alibi-learned"), Interp::Linear);
  refused(test::tinyConfig("t5"), Interp::Linear);
  refused(pi, Interp::Linear);  // rope scaling of its own already
  CHECK_NOTHROW(adaptedModelConfig(test::tinyConfig("t5"), 64, Interp::None, 1.0));
  ModelConfig learned = test::tinyConfig("learned");  // a table of 64 rows
  CHECK_NOTHROW(adaptedModelConfig(learned, 64, Interp::None, 1.0));
  CHECK_THROWS_AS(adaptedModelConfig(learned, 65, Interp::None, 1.0), std::invalid_argument);
}

TEST_CASE("the adapted model computes what the source computes under eval's interpolation") {
  torch::manual_seed(11);
  auto tokens = torch::randint(0, 50, {2, 64});
  struct Case {
    std::string pos;
    Interp interp;
  };
  for (const Case& c : std::vector<Case>{{"rotary", Interp::Linear},
                                         {"rotary", Interp::Ntk},
                                         {"rotary", Interp::Yarn},
                                         {"alibi", Interp::Linear},
                                         {"alibi", Interp::Ntk},
                                         {"alibi-onesided", Interp::Ntk}}) {
    INFO(c.pos << " " << interpName(c.interp));
    ModelConfig config = test::tinyConfig(c.pos, c.pos == "alibi-onesided" ? "encoder" : "decoder");
    Transformer source(config);
    Transformer adapted(adaptedModelConfig(config, 64, c.interp, 4.0));
    copySourceWeights(adapted, source);
    applyInterpolation(source, c.interp, 4.0);
    source->eval(), adapted->eval();
    torch::NoGradGuard g;
    CHECK(test::maxAbsDiff(adapted->features(tokens), source->features(tokens)) < 1e-5);
  }
}

TEST_CASE("train --init starts from the source's weights and eval applies the baked transform") {
  for (std::string pos : {"rotary", "alibi"}) {
    INFO(pos);
    RunInfo source = test::trainTiny("adapt-source-" + pos, test::tinyConfig(pos), 5);
    ModelConfig adaptedConfig = adaptedModelConfig(source.model, 32, Interp::Linear, 2.0);
    // One step at a learning rate that cannot move a weight measurably: the adapted run's
    // checkpoint holds the source's weights.
    RunInfo adapted = test::trainTiny("adapt-" + pos, adaptedConfig, 1, 1, [&](TrainConfig& t) {
      t.initRun = source.dir.string();
      t.initDigest = checkpointDigest(source);
      t.initStep = source.stepsDone;
      t.initInterp = "linear";
      t.initScale = 2.0;
      t.lr = 1e-12;
      t.warmupSteps = 0;
    });
    RunInfo written = readRunInfo(adapted.dir);
    CHECK(written.model.contextLength == 32);
    CHECK(written.train.initRun == source.dir.string());
    CHECK(written.train.initStep == 5);
    CHECK(written.train.initDigest.size() == 16);
    // eval builds the adapted run from run.json alone: the interpolation is already in it.
    Transformer fromRun = loadTrainedModel(written);
    Transformer reference = loadTrainedModel(source);
    applyInterpolation(reference, Interp::Linear, 2.0);
    torch::NoGradGuard g;
    auto tokens = torch::randint(0, 50, {1, 32});
    CHECK(test::maxAbsDiff(fromRun->features(tokens), reference->features(tokens)) < 1e-5);
  }
}
