// Learning-rate schedule, config validation and JSON round trips, named configs, the choice
// tables behind --help.
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>

#include "error_of.h"
#include "model/interpolation.h"
#include "model/model_config.h"
#include "model/named_configs.h"
#include "run/adapt_config.h"
#include "run/run_directory.h"
#include "run/train_config.h"
#include "train/lr_schedule.h"
#include "util/choices.h"

using namespace xtrap;

TEST_CASE("warmup then cosine to lr * minLrRatio, inverse sqrt") {
  TrainConfig c;
  c.lr = 1.0;
  c.warmupSteps = 10;
  c.minLrRatio = 0.1;
  CHECK(learningRate(c, 0, 110) == Approx(0.1));
  CHECK(learningRate(c, 9, 110) == Approx(1.0));
  CHECK(learningRate(c, 59, 110) == Approx(0.1 + 0.45 * (1 + std::cos(M_PI * 0.5))));  // half way
  CHECK(learningRate(c, 109, 110) == Approx(0.1));
  c.schedule = "inverse-sqrt";
  CHECK(learningRate(c, 39, 110) == Approx(std::sqrt(10.0 / 40.0)));
}

TEST_CASE("model config validation gives one-line reasons") {
  ModelConfig c;
  c.vocabSize = 100;
  CHECK_NOTHROW(c.validate());
  c.heads = 3;
  CHECK_THROWS_WITH(c.validate(), "--heads (3) must divide --d-model (128)");
  c = ModelConfig{};
  c.pos = "alibi-offset";
  CHECK_THROWS_WITH(c.validate(), Catch::Contains("decoders use alibi"));
  c.arch = "encoder";
  CHECK_NOTHROW(c.validate());
  c.pos = "alibi-onesided";
  c.heads = 1;
  CHECK_THROWS_WITH(c.validate(), "alibi-onesided needs an even number of heads");
  c.pos = "xpos";
  CHECK_THROWS_WITH(c.validate(), Catch::Contains("unknown position method 'xpos'"));
  c = ModelConfig{};
  c.contextLength = 0;
  CHECK_THROWS_WITH(c.validate(), Catch::Contains("--L must be"));
  c = ModelConfig{};
  c.head = "mlp";
  CHECK_THROWS_WITH(c.validate(), Catch::Contains("unknown --head 'mlp'"));
}

TEST_CASE("configs round-trip through JSON") {
  ModelConfig m;
  m.pos = "t5";
  m.adaptiveSoftmaxCutoffs = {20, 60};
  m.vocabSize = 1000;
  ModelConfig back = nlohmann::json(m).get<ModelConfig>();
  CHECK(nlohmann::json(back) == nlohmann::json(m));
  TrainConfig t;
  t.lr = 3e-4;
  t.batchOrder = "contiguous";
  CHECK(nlohmann::json(nlohmann::json(t).get<TrainConfig>()) == nlohmann::json(t));
}

TEST_CASE("named seed configurations") {
  ModelConfig c;
  applyNamedConfig("zero-clap", c);
  CHECK(c.arch == "encoder");
  CHECK(c.pos == "alibi-offset");
  CHECK(c.head == "clap");
  applyNamedConfig("baseline", c);
  CHECK(c.pos == "learned");
  CHECK(c.head == "roberta");
  CHECK_THROWS_WITH(applyNamedConfig("bert", c), Catch::Contains("unknown --config 'bert'"));
}

TEST_CASE("paper-wt103 is fairseq's transformer_lm_wiki103, and flags given beside it win") {
  ModelConfig c;
  applyNamedConfig("paper-wt103", c);
  CHECK(c.arch == "decoder");
  CHECK(c.pos == "alibi");
  CHECK(c.layers == 16);
  CHECK(c.dModel == 1024);
  CHECK(c.heads == 8);
  CHECK(c.ffn == 4096);
  CHECK(c.activation == "relu");
  CHECK(!c.finalNorm);
  CHECK(c.dropout == 0.3);
  CHECK(c.attentionDropoutRate() == 0.1);
  CHECK(c.activationDropoutRate() == 0.1);
  CHECK(c.adaptiveSoftmaxCutoffs == std::vector<int64_t>{20000, 60000});
  CHECK(c.adaptiveSoftmaxDropout == 0.2);
  CHECK(c.adaptiveInput);
  CHECK(c.scaleEmbedding);
  CHECK(c.contextLength == 512);
  ModelConfig small;
  small.dModel = 256;
  small.pos = "sinusoidal";
  applyNamedConfig("paper-wt103", small,
                   [](const std::string& flag) { return flag == "--d-model" || flag == "--pos"; });
  CHECK(small.dModel == 256);
  CHECK(small.pos == "sinusoidal");
  CHECK(small.layers == 16);
  CHECK(namedConfigFixesPositionAndHead("zero-clap"));
  CHECK(!namedConfigFixesPositionAndHead("paper-wt103"));
}

TEST_CASE("every choice table is exactly what its parser accepts", "[cli]") {
  // The tables --help is written from (util/choices.h) against the names written out here: each
  // is accepted, and a name outside them is refused, naming them all.
  auto acceptsExactly = [](const std::vector<std::string>& table, const std::vector<std::string>& expected,
                           const std::function<void(const std::string&)>& parse) {
    CHECK(table == expected);
    for (const auto& name : expected) {
      INFO(name);
      CHECK_NOTHROW(parse(name));
    }
    CHECK_THROWS_WITH(parse("bogus"), Catch::Contains("(valid: " + joinNames(expected, ", ") + ")"));
  };
  acceptsExactly(positionMethodNames(),
                 {"none", "sinusoidal", "learned", "rotary", "t5", "alibi", "alibi-offset", "alibi-onesided",
                  "alibi-learned", "bialibi", "kerple-log", "fire"},
                 [](const std::string& n) { parsePositionMethod(n); });
  // Every method's name parses back to it.
  for (PositionMethod m :
       {PositionMethod::None, PositionMethod::Sinusoidal, PositionMethod::Learned, PositionMethod::Rotary,
        PositionMethod::T5, PositionMethod::Alibi, PositionMethod::AlibiOffset, PositionMethod::AlibiOneSided,
        PositionMethod::AlibiLearned, PositionMethod::BiAlibi, PositionMethod::KerpleLog, PositionMethod::Fire})
    CHECK(parsePositionMethod(positionMethodName(m)) == m);
  acceptsExactly(interpNames(), {"none", "linear", "ntk", "dynamic-ntk", "yarn", "dynamic-yarn"},
                 [](const std::string& n) { parseInterp(n); });
  for (Interp i : {Interp::None, Interp::Linear, Interp::Ntk, Interp::DynamicNtk, Interp::Yarn, Interp::DynamicYarn})
    CHECK(parseInterp(interpName(i)) == i);
  acceptsExactly(ntkHeadsNames(), {"all", "leading-power-of-two"}, [](const std::string& n) { parseNtkHeads(n); });
  auto model = [](auto set) {
    return [set](const std::string& n) {
      ModelConfig c;
      c.arch = "encoder";
      c.pos = "alibi-learned";
      c.vocabSize = 100;
      set(c, n);
      c.validate();
    };
  };
  acceptsExactly(ModelConfig::archNames(), {"decoder", "encoder"}, model([](ModelConfig& c, const std::string& n) {
                   c.arch = n;
                   c.pos = "alibi";
                 }));
  acceptsExactly(ModelConfig::headNames(), {"lm", "roberta", "clap"},
                 model([](ModelConfig& c, const std::string& n) { c.head = n; }));
  acceptsExactly(ModelConfig::activationNames(), {"gelu", "gelu-tanh", "relu", "silu"},
                 model([](ModelConfig& c, const std::string& n) { c.activation = n; }));
  acceptsExactly(ModelConfig::alibiInitNames(), {"random", "standard"},
                 model([](ModelConfig& c, const std::string& n) { c.alibiInit = n; }));
  acceptsExactly(namedConfigNames(), {"baseline", "learned-clap", "alibi", "zero-clap", "paper-wt103"},
                 [](const std::string& n) {
                   ModelConfig c;
                   applyNamedConfig(n, c);
                 });
  auto train = [](auto set) {
    return [set](const std::string& n) {
      TrainConfig c;
      set(c, n);
      c.validate();
    };
  };
  acceptsExactly(TrainConfig::scheduleNames(), {"cosine", "inverse-sqrt", "constant"},
                 train([](TrainConfig& c, const std::string& n) { c.schedule = n; }));
  acceptsExactly(adaptRecipeNames(), {"pi", "yarn"}, [](const std::string& n) {
    TrainConfig t;
    applyAdaptRecipe(n, t, [](const std::string&) { return false; });
  });
  acceptsExactly(TrainConfig::batchOrderNames(), {"random", "contiguous"},
                 train([](TrainConfig& c, const std::string& n) { c.batchOrder = n; }));
}

TEST_CASE("a directory that is neither an xtrap run nor a Hugging Face model says so") {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / "xtrap-test-not-a-run";
  fs::remove_all(dir);
  CHECK(test::errorOf([&] { readRunInfo(dir); }) == "not a run directory: " + dir.string() + " does not exist");
  fs::create_directories(dir);
  CHECK(test::errorOf([&] { readRunInfo(dir); }) ==
        "not a run directory: " + dir.string() +
            " has neither run.json (an xtrap run) nor config.json (a Hugging Face model)");
  std::ofstream(dir / "file.txt") << "x";
  CHECK(test::errorOf([&] { readRunInfo(dir / "file.txt"); }) ==
        "not a run directory: " + (dir / "file.txt").string() + " is a file");
  fs::remove_all(dir);
}
