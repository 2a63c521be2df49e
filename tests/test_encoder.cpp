// Masked-LM encoders: corruption of a batch, every seed configuration and ALiBi variant trains,
// and evaluation scores the same masked tokens at every Lvalid and stride.
#include <catch2/catch.hpp>
#include <fstream>

#include "data/masked_batch.h"
#include "data/mlm_masking.h"
#include "data/wikitext.h"
#include "eval/encoder_score.h"
#include "eval/evaluate_run.h"
#include "model/named_configs.h"
#include "test_support.h"
#include "run/checkpoint.h"

using namespace xtrap;

TEST_CASE("applyMlmMasking corrupts exactly the selected positions as mlmMaskChoice says") {
  auto seq = torch::arange(0, 2 * 300, torch::kLong).remainder(90).view({2, 300});
  std::vector<int64_t> starts{1000, 5000};
  MaskedBatch m = applyMlmMasking(seq, starts, 9, 0.15, 100);  // <mask> = 99
  int64_t r = 0;
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t t = 0; t < 300; ++t) {
      MaskChoice c = mlmMaskChoice(9, starts[b] + t, 0.15, 99);
      int64_t in = m.inputs[b][t].item<int64_t>(), orig = seq[b][t].item<int64_t>();
      if (c.action == MaskAction::NotSelected) {
        CHECK(in == orig);
        continue;
      }
      REQUIRE(m.positions[r].item<int64_t>() == b * 300 + t);
      CHECK(m.targets[r].item<int64_t>() == orig);
      if (c.action == MaskAction::Mask) CHECK(in == 99);
      if (c.action == MaskAction::Random) CHECK(in == c.randomToken);
      if (c.action == MaskAction::Keep) CHECK(in == orig);
      ++r;
    }
  CHECK(r == m.positions.size(0));
}

TEST_CASE("every seed configuration and ALiBi variant trains as an MLM encoder and evaluates at L..4L") {
  std::vector<std::pair<std::string, test::ModelSetup>> setups;
  for (const auto& name : namedConfigNames())
    setups.push_back({name, [name](ModelConfig& c) { applyNamedConfig(name, c); }});
  for (std::string pos : {"alibi", "alibi-onesided", "alibi-learned", "bialibi"})
    setups.push_back({pos, [pos](ModelConfig& c) { c.pos = pos; }});
  for (const auto& [name, setup] : setups) {
    INFO("encoder " << name);
    auto cfg = test::tinyConfig("alibi", "encoder");
    setup(cfg);
    // CLAP logits are bounded by beta * |x|; at beta = 1 a 40-step run barely leaves the uniform
    // loss, so the test starts beta higher (it is learned either way).
    if (cfg.head == "clap") cfg.clapBeta = 8.0;
    RunInfo run = test::trainTiny("enc-" + name, cfg, 40);
    std::vector<double> losses;
    std::ifstream in(run.dir / "train.jsonl");
    for (std::string line; std::getline(in, line);) {
      auto j = nlohmann::json::parse(line);
      if (j.contains("loss")) losses.push_back(j["loss"].get<double>());
    }
    REQUIRE(losses.size() == 40);
    double first = (losses[0] + losses[1] + losses[2] + losses[3] + losses[4]) / 5;
    double last = (losses[35] + losses[36] + losses[37] + losses[38] + losses[39]) / 5;
    CHECK(last < first - 0.5);
    EvalRequest req;
    req.runs = {run.dir};
    req.lvalids = {16, 32, 64};
    req.maxTokens = 4000;
    req.progress = false;
    auto rows = evaluateRuns(req);
    REQUIRE(rows.size() == 3);
    CHECK(rows[0].tokensScored == rows[1].tokensScored);  // same masked tokens at every length
    CHECK(rows[1].tokensScored == rows[2].tokensScored);
    CHECK(rows[0].tokensScored == Approx(600).margin(90));  // ~15% of 4000
    for (const auto& r : rows) CHECK(std::isfinite(r.ppl));
  }
}

TEST_CASE("encoder sliding evaluation scores each masked token once") {
  auto cfg = test::tinyConfig("alibi-offset", "encoder");
  RunInfo run = test::trainTiny("enc-sliding", cfg, 5);
  Transformer model = loadTrainedModel(run);
  Corpus corpus = loadWikiText(XTRAP_DEFAULT_DATA_DIR);
  std::vector<int32_t> stream(corpus.valid.begin(), corpus.valid.begin() + 3000);
  EncoderScoreOptions opt;
  opt.Lvalid = 32;
  auto nonOverlap = scoreEncoder(model, stream, opt);
  int64_t expected = 0;
  for (int64_t p = 0; p < 3000; ++p)
    expected += mlmMaskChoice(opt.maskSeed, p, 0.15, model->config.vocabSize - 1).action != MaskAction::NotSelected;
  CHECK(nonOverlap.tokens == expected);
  for (int64_t stride : {1, 7, 16}) {
    opt.stride = stride;
    CHECK(scoreEncoder(model, stream, opt).tokens == expected);
  }
}
