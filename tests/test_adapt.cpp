// Extend, then adapt (train --init, run/adapt_config.h, train/init_from_run.h): each
// interpolation is baked into the adapted configuration as the papers define it (hand-computed
// bases, slopes and scalings); the adapted model computes what the source computes under eval's
// --interp at the same factor (two routes: the baked configuration against applyInterpolation);
// the trainer starts from the source's weights (the first loss is the interpolated source's on the
// first batch), records where it came from, resumes exactly, and `eval` of the adapted run applies
// the transform without flags; what has no meaning is refused.
#include <catch2/catch.hpp>
#include <cmath>
#include <fstream>

#include "data/block_sampler.h"
#include "data/wikitext.h"
#include "error_of.h"
#include "eval/model_interpolation.h"
#include "export/hf_export.h"
#include "model/position/linear_bias.h"
#include "run/checkpoint.h"
#include "run/config_identity.h"
#include "run/pretrained_config.h"
#include "test_support.h"
#include "train/init_from_run.h"
#include "train/objective.h"
#include "util/atomic_file.h"

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
      t.initSource = runIdentityHash(source.model, source.train);
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
    CHECK(written.train.initDigest == checkpointDigest(source));
    // eval builds the adapted run from run.json alone: the interpolation is already in it.
    Transformer fromRun = loadTrainedModel(written);
    Transformer reference = loadTrainedModel(source);
    applyInterpolation(reference, Interp::Linear, 2.0);
    torch::NoGradGuard g;
    auto tokens = torch::randint(0, 50, {1, 32});
    CHECK(test::maxAbsDiff(fromRun->features(tokens), reference->features(tokens)) < 1e-5);
  }
}

namespace {
// The first batch of a run at L = 32, drawn as every run draws it (8 blocks of L + 1 = 33 tokens of
// `train`, the run's seed), and the mean next-token NLL `reference` gives it in training mode (dropout
// 0): what the run's first step logs. Inputs are tokens 0..31 of each block, targets 1..32.
struct FirstBatch {
  torch::Tensor batch;  // (8, 33)
  double nll;
};
FirstBatch firstBatch(Transformer& reference, const TokenSpan& train, uint64_t seed) {
  std::vector<torch::Tensor> blocks;
  for (int64_t start : BlockSampler(int64_t(train.size()), 33, false, seed).next(8))
    blocks.push_back(torch::tensor(std::vector<int64_t>(train.begin() + start, train.begin() + start + 33)));
  torch::Tensor batch = torch::stack(blocks);
  torch::NoGradGuard g;
  reference->train();
  torch::Tensor features = reference->features(batch.narrow(1, 0, 32));  // (8, 32, C)
  torch::Tensor nll =
      reference->tokenNll(features.reshape({-1, features.size(-1)}), batch.narrow(1, 1, 32).reshape({-1}));
  return {batch, nll.mean().item<double>()};
}

// An adapted run of `source` at L = 32 with linear interpolation at a = 2.
test::TrainSetup adaptedFrom(const RunInfo& source) {
  return [&source](TrainConfig& t) {
    t.initRun = source.dir.string();
    t.initSource = runIdentityHash(source.model, source.train);
    t.initStep = source.stepsDone;
    t.initInterp = "linear";
    t.initScale = 2.0;
  };
}
}  // namespace

TEST_CASE("an adapted run's first loss is the source's, interpolated, on the first batch at the new L") {
  for (std::string pos : {"rotary", "alibi"}) {
    INFO(pos);
    RunInfo source = test::trainTiny("adapt-first-source-" + pos, test::tinyConfig(pos), 5);
    RunInfo adapted = test::trainTiny("adapt-first-" + pos, adaptedModelConfig(source.model, 32, Interp::Linear, 2.0),
                                      1, 1, adaptedFrom(source));
    Transformer reference = loadTrainedModel(source);
    applyInterpolation(reference, Interp::Linear, 2.0);
    FirstBatch first = firstBatch(reference, loadWikiText(adapted.train.dataDir).train, adapted.train.seed);
    std::vector<double> logged = test::loggedLosses(adapted);
    REQUIRE(!logged.empty());
    CHECK(logged.front() == Approx(first.nll).epsilon(1e-6));
  }
}

TEST_CASE("an adapted run resumes exactly, and refuses a source that is not the one it names") {
  RunInfo source = test::trainTiny("adapt-resume-source", test::tinyConfig("rotary"), 5);
  ModelConfig config = adaptedModelConfig(source.model, 32, Interp::Linear, 2.0);
  auto everyThree = [&](TrainConfig& t) {
    adaptedFrom(source)(t);
    t.checkpointEvery = 3;
  };
  RunInfo whole = test::trainTiny("adapt-whole", config, 6, 1, everyThree);
  // The same run stopped at step 5 (a NaN there, --max-bad-steps 1): its checkpoint is step 3's.
  auto stopAtFive = [&](TrainConfig& t) {
    everyThree(t);
    t.maxBadSteps = 1;
  };
  std::string error = test::errorOf([&] {
    test::trainTiny("adapt-parted", config, 6, 1, stopAtFive, [](TrainRequest& r) { r.injectNanAtSteps = {5}; });
  });
  REQUIRE(error.find("(step 3)") != std::string::npos);
  TrainRequest resume;
  resume.resume = true;
  resume.runDir = std::filesystem::temp_directory_path() / "xtrap-test-run-adapt-parted";
  resume.progress = false;
  RunInfo parted = trainRun(resume);
  CHECK(test::loggedLosses(parted) == test::loggedLosses(whole));
  CHECK(parted.extra["final_val_loss"] == whole.extra["final_val_loss"]);
  CHECK(parted.train.initDigest == whole.train.initDigest);

  // Another source at the path, or the same one trained further, is not the run it names.
  std::string wrongStep = test::errorOf([&] {
    test::trainTiny("adapt-wrong-step", config, 1, 1, [&](TrainConfig& t) {
      adaptedFrom(source)(t);
      t.initStep = 4;
    });
  });
  CHECK_THAT(wrongStep, Catch::Contains("is not the source this run names"));
  std::string wrongRun = test::errorOf([&] {
    test::trainTiny("adapt-wrong-run", config, 1, 1, [&](TrainConfig& t) {
      adaptedFrom(source)(t);
      t.initSource = "000000000000";
    });
  });
  CHECK_THAT(wrongRun, Catch::Contains("is not the source this run names"));
}

namespace {
// A WikiText directory of the first 300 lines of each shipped split: the tokenizer caches the ids
// beside the files it reads, which belong in a scratch directory, not in the shipped data.
std::filesystem::path shippedDataSlice(const std::string& name) {
  auto dir = std::filesystem::temp_directory_path() / ("xtrap-test-data-" + name);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  for (std::string split : {"train", "valid", "test"}) {
    std::ifstream in(std::filesystem::path(XTRAP_DEFAULT_DATA_DIR) / ("wiki." + split + ".tokens"));
    std::ofstream out(dir / ("wiki." + split + ".tokens"));
    std::string line;
    for (int i = 0; i < 300 && std::getline(in, line); ++i) out << line << "\n";
  }
  return dir;
}
}  // namespace

TEST_CASE("train --init from a Hugging Face directory trains on its tokenizer from exactly its weights") {
  // The source: a tiny rotary run exported as gpt_neox (a WordLevel tokenizer of its words, so the
  // tokenizer's ids of the data are the run's word ids: the expected batch needs no tokenizer).
  auto data = shippedDataSlice("adapt-hf");
  ModelConfig config = test::tinyConfig("rotary");
  RunInfo trained = test::trainTiny("adapt-hf-source", config, 3, 1, [&](TrainConfig& t) { t.dataDir = data; });
  auto hfDir = std::filesystem::temp_directory_path() / "xtrap-test-adapt-hf-export";
  std::filesystem::remove_all(hfDir);
  exportHuggingFace(trained.dir, hfDir);
  RunInfo source = readRunInfo(hfDir);
  REQUIRE(source.pretrained == "gpt_neox");
  auto fromHf = [&](TrainConfig& t) {
    t.dataDir = data;
    t.initRun = hfDir.string();
    t.initSource = pretrainedWeightsDigest(hfDir);
    t.initStep = 0;
    t.initInterp = "yarn";
    t.initScale = 2.0;
  };
  ModelConfig adaptedConfig = adaptedModelConfig(source.model, 32, Interp::Yarn, 2.0);
  // One step at a learning rate that cannot move a weight measurably.
  RunInfo adapted = test::trainTiny("adapt-hf", adaptedConfig, 1, 1, [&](TrainConfig& t) {
    fromHf(t);
    t.lr = 1e-12;
    t.warmupSteps = 0;
  });
  RunInfo written = readRunInfo(adapted.dir);
  CHECK(written.tokenizerFamily == "gpt_neox");
  CHECK(written.readsTokenizer());
  CHECK(written.contextToken == source.contextToken);
  CHECK(written.train.initDigest == checkpointDigest(source));
  CHECK(readTextFile(written.dir / "tokenizer.json") == readTextFile(hfDir / "tokenizer.json"));
  CHECK(readTextFile(written.dir / "source_config.json") == readTextFile(hfDir / "config.json"));

  // The first loss: the source with YaRN at a = 2 on the first batch at L = 32, the data's words.
  Transformer reference = loadTrainedModel(source);
  applyInterpolation(reference, Interp::Yarn, 2.0);
  FirstBatch first = firstBatch(reference, loadWikiText(data).train, written.train.seed);
  std::vector<double> logged = test::loggedLosses(adapted);
  REQUIRE(!logged.empty());
  CHECK(logged.front() == Approx(first.nll).epsilon(1e-6));
  {
    // eval builds it from run.json alone: the transform is in it.
    torch::NoGradGuard g;
    reference->eval();
    Transformer fromRun = loadTrainedModel(written);
    auto tokens = first.batch.narrow(1, 0, 32);
    CHECK(test::maxAbsDiff(fromRun->features(tokens), reference->features(tokens)) < 1e-5);
  }

  // Resume: stopped at step 5 (a NaN there, --max-bad-steps 1) from step 3's checkpoint, then
  // resumed (reading the tokenizer copied into the run), it logs what the whole run logs.
  auto everyThree = [&](TrainConfig& t) {
    fromHf(t);
    t.checkpointEvery = 3;
  };
  RunInfo whole = test::trainTiny("adapt-hf-whole", adaptedConfig, 6, 1, everyThree);
  std::string error = test::errorOf([&] {
    test::trainTiny(
        "adapt-hf-parted", adaptedConfig, 6, 1,
        [&](TrainConfig& t) {
          everyThree(t);
          t.maxBadSteps = 1;
        },
        [](TrainRequest& r) { r.injectNanAtSteps = {5}; });
  });
  REQUIRE(error.find("(step 3)") != std::string::npos);
  TrainRequest resume;
  resume.resume = true;
  resume.runDir = std::filesystem::temp_directory_path() / "xtrap-test-run-adapt-hf-parted";
  resume.progress = false;
  RunInfo parted = trainRun(resume);
  CHECK(test::loggedLosses(parted) == test::loggedLosses(whole));
  CHECK(parted.extra["final_val_loss"] == whole.extra["final_val_loss"]);

  // A directory whose weights are not the ones named is refused.
  std::string wrong = test::errorOf([&] {
    test::trainTiny("adapt-hf-wrong", adaptedConfig, 1, 1, [&](TrainConfig& t) {
      fromHf(t);
      t.initSource = "fnv1a64:0000000000000000";
    });
  });
  CHECK_THAT(wrong, Catch::Contains("is not the source this run names"));
}
