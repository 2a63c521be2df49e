// Masked-LM encoders: corruption of a batch, every seed configuration and ALiBi variant trains,
// and evaluation scores the same masked tokens at every Lvalid and stride.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <fstream>
#include <numeric>
#include <set>

#include "data/masked_batch.h"
#include "data/mlm_masking.h"
#include "data/wikitext.h"
#include "eval/encoder_score.h"
#include "eval/evaluate_run.h"
#include "model/named_configs.h"
#include "run/checkpoint.h"
#include "run/run_directory.h"
#include "test_support.h"
#include "util/torch_compat.h"

using namespace xtrap;

TEST_CASE("corruptSelected corrupts exactly the selected positions as mlmCorruption says, never <bos>") {
  std::vector<int32_t> stream(6000);
  for (size_t i = 0; i < stream.size(); ++i) stream[i] = int32_t(i % 90);
  std::vector<int64_t> starts{1000, 5000};
  MlmTokens tokens{99, 98, {1, 2, 3}};                              // <mask> = 99, <bos> = 98, replacements 1..3
  auto windows = gatherWindows(stream, starts, 300, tokens.bosId);  // (2, 301): <bos> + 300 words
  REQUIRE(windows.sizes() == torch::IntArrayRef({2, 301}));
  std::vector<std::vector<int64_t>> selected(2);
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t o : exactCountSelection(uint64_t(b), 300, 0.15)) selected[size_t(b)].push_back(starts[b] + o);
  MaskedBatch m = corruptSelected(windows, starts, selected, 9, tokens);
  REQUIRE(m.positions.size(0) == 90);  // exactly 0.15 * 300 per window
  int64_t r = 0;
  for (int64_t b = 0; b < 2; ++b) {
    CHECK(m.inputs[b][0].item<int64_t>() == 98);
    for (int64_t t = 1; t < 301; ++t) {
      int64_t p = starts[b] + t - 1, in = m.inputs[b][t].item<int64_t>(), orig = stream[size_t(p)];
      CHECK(windows[b][t].item<int64_t>() == orig);
      const auto& sel = selected[size_t(b)];
      if (std::find(sel.begin(), sel.end(), p) == sel.end()) {
        CHECK(in == orig);
        continue;
      }
      MaskChoice c = mlmCorruption(9, p, tokens.replacementWords);
      REQUIRE(m.positions[r].item<int64_t>() == b * 301 + t);
      CHECK(m.targets[r].item<int64_t>() == orig);
      if (c.action == MaskAction::Mask) CHECK(in == 99);
      if (c.action == MaskAction::Random) CHECK(in == c.randomToken);
      if (c.action == MaskAction::Keep) CHECK(in == orig);
      ++r;
    }
  }
  CHECK(r == m.positions.size(0));
}

TEST_CASE("every seed configuration and ALiBi variant trains as an MLM encoder and evaluates at L..4L") {
  std::vector<std::pair<std::string, test::ModelSetup>> setups;
  for (const auto& name : encoderSeedConfigNames())
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
    // A step's loss is a mean over only ~18 masked tokens (8 windows of 15-16 words, 2-3 masked
    // each), so its noise is ~0.4 nats: compare 10-step means.
    double first = std::accumulate(losses.begin(), losses.begin() + 10, 0.0) / 10;
    double last = std::accumulate(losses.end() - 10, losses.end(), 0.0) / 10;
    CHECK(last < first - 0.3);
    EvalRequest req;
    req.runs = {run.dir};
    req.lvalids = {16, 32, 64};
    req.maxTokens = 4000;
    req.progress = false;
    req.device = "cpu";
    auto rows = evaluateRuns(req);
    REQUIRE(rows.size() == 3);
    CHECK(rows[0].tokensScored == rows[1].tokensScored);  // same masked tokens at every length
    CHECK(rows[1].tokensScored == rows[2].tokensScored);
    // aligned blocks of 64 tokens: int(0.15 * 64 + u) per block, 62.5 blocks
    CHECK(rows[0].tokensScored == Approx(0.15 * 4000).margin(63));
    for (const auto& r : rows) CHECK(std::isfinite(r.ppl));
    // The slopes column: one list where past and future slopes are equal, both halves otherwise
    // (H = 4: standard slopes 1/4 1/16 1/64 1/256; one-sided halves are 2-head sets 1/16 1/256).
    if (name == "alibi") CHECK(rows[0].slopes == "0.25 0.0625 0.015625 0.0039062");
    if (name == "alibi-onesided") CHECK(rows[0].slopes == "past 0.0625 0.0039062 | future 0.0625 0.0039062");
    if (name == "bialibi") CHECK(rows[0].slopes.rfind("past ", 0) == 0);
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
  opt.mlm = model->config.mlmTokens(corpus.vocab);
  auto expected = scoreEncoder(model, stream, opt).tokens;
  CHECK(expected == Approx(0.15 * 3000).margin(3000.0 / 64));  // int(0.15 * 64 + u) per 64 tokens
  for (int64_t stride : {1, 7, 16}) {
    opt.stride = stride;
    CHECK(scoreEncoder(model, stream, opt).tokens == expected);
  }
}

TEST_CASE("bialibi: standard init and a <bos> by default, recorded in run.json, <bos> scored never") {
  auto cfg = test::tinyConfig("bialibi", "encoder");
  cfg.alibiInit.clear();  // the variant's default
  REQUIRE(cfg.usesBos());
  RunInfo run = test::trainTiny("enc-bialibi-bos", cfg, 3);
  auto json = nlohmann::json::parse(std::ifstream(run.dir / "run.json"));
  CHECK(json["model"]["alibi_init"] == "standard");
  CHECK(json["model"]["bos"] == true);
  Corpus corpus = loadWikiText(XTRAP_DEFAULT_DATA_DIR);
  CHECK(run.model.vocabSize == corpus.vocab.size() + 2);  // <mask>, then <bos>
  Transformer model = loadTrainedModel(readRunInfo(run.dir));
  REQUIRE(model->config.usesBos());
  CHECK(model->config.bosId() == corpus.vocab.size() + 1);
  // the learned slopes start at the standard ones (H = 4: 1/4, 1/16, 1/64, 1/256) before training
  Transformer fresh(cfg);
  auto past = fresh->linearBias()->slopePast();
  for (int64_t h = 0; h < 4; ++h) CHECK(past[h].item<double>() == Approx(std::pow(0.25, double(h + 1))));
  auto learned = test::tinyConfig("alibi-learned", "encoder");
  learned.alibiInit.clear();
  CHECK(learned.resolvedAlibiInit() == "random");
  CHECK_FALSE(learned.usesBos());
  learned.bos = true;
  CHECK(learned.usesBos());

  std::vector<int32_t> stream(corpus.valid.begin(), corpus.valid.begin() + 1000);
  EncoderScoreOptions opt;
  opt.Lvalid = 16;  // <bos> + 15 words per window
  opt.positionBuckets = 16;
  opt.mlm = model->config.mlmTokens(corpus.vocab);
  auto totals = scoreEncoder(model, stream, opt);
  CHECK(totals.tokens == Approx(0.15 * 1000).margin(1000.0 / 64));
  CHECK(totals.bucketTokens[0] == 0);  // window position 0 is <bos>: never scored
  for (int64_t L : {8, 40, 1000}) {
    opt.Lvalid = L;
    opt.positionBuckets = 0;
    CHECK(scoreEncoder(model, stream, opt).tokens == totals.tokens);
  }
}

TEST_CASE("run.json without a bos key loads as no <bos>") {
  auto c = test::tinyConfig("bialibi", "encoder");
  nlohmann::json j = c;
  CHECK(j["bos"] == true);
  j.erase("bos");
  ModelConfig back = j.get<ModelConfig>();
  CHECK_FALSE(back.usesBos());
  CHECK(back.alibiInit == "standard");
}

namespace {
// The share of a window's words whose input differs from the text: <mask> or a random word.
double corruptedShare(const torch::Tensor& inputs, const torch::Tensor& clean, int64_t row, int64_t shift) {
  auto changed = inputs[row].slice(0, shift).ne(clean[row].slice(0, shift)).sum().item<int64_t>();
  return double(changed) / double(inputs.size(1) - shift);
}
}  // namespace

TEST_CASE("every encoder evaluation window is as corrupted as a training window, sliding or not") {
  // Words 100..189; replacements 1..3, so a random replacement always differs from the text and
  // the visible corruption of a selected token is <mask> (80%) or random (10%): 0.9 * 0.15.
  std::vector<int32_t> stream(20000);
  for (size_t i = 0; i < stream.size(); ++i) stream[i] = int32_t(100 + (i * 7919) % 90);
  const double p = 0.15, expected = 0.9 * p;
  for (int64_t bos : {int64_t(-1), int64_t(98)}) {
    MlmTokens mlm{99, bos, {1, 2, 3}};
    int64_t shift = mlm.bosColumns();
    // Training: exactly int(p * n + u) of a window's n words, as fairseq selects them.
    double trainingShare = 0;
    for (int64_t b = 0; b < 200; ++b) {
      std::vector<int64_t> starts{b * 97};
      std::vector<std::vector<int64_t>> selected(1);
      for (int64_t o : exactCountSelection(uint64_t(1000 + b), 128, p)) selected[0].push_back(starts[0] + o);
      auto clean = gatherWindows(stream, starts, 128, bos);
      trainingShare += corruptedShare(corruptSelected(clean, starts, selected, 5, mlm).inputs, clean, 0, shift) / 200;
    }
    CHECK(trainingShare == Approx(expected).margin(0.01));
    for (int64_t Lvalid : {128, 256, 1024}) {
      for (int64_t stride : {Lvalid, int64_t(64)}) {
        INFO("<bos> " << bos << ", Lvalid " << Lvalid << ", stride " << stride);
        EncoderScoreOptions opt;
        opt.Lvalid = Lvalid;
        opt.stride = stride;
        opt.mlm = mlm;
        EncoderWindowing w = encoderWindowing(int64_t(stream.size()), opt);
        double meanShare = 0;
        int64_t scored = 0;
        for (size_t k = 0; k < w.windows.size(); ++k) {
          MaskedBatch m = maskEncoderWindows(stream, w, {k}, opt);
          auto clean = gatherWindows(stream, {w.windows[k].start}, w.windows[k].length, bos);
          double share = corruptedShare(m.inputs, clean, 0, shift);
          // One window: selection exact per 64-token block, then Binomial(0.9) per selected token.
          double W = double(w.windows[k].length);
          CHECK(std::abs(share - expected) * W <= 4 * std::sqrt(W * expected * (1 - expected)) + 10);
          meanShare += share / double(w.windows.size());
          scored += m.positions.size(0);
          for (int64_t i = 0; i < m.positions.size(0); ++i)  // it scores only tokens it corrupted or kept
            CHECK(m.targets[i].item<int64_t>() >= 100);
        }
        CHECK(meanShare == Approx(trainingShare).margin(0.01));
        CHECK(scored == Approx(p * double(stream.size())).margin(double(stream.size()) / 64));
      }
    }
  }
}

TEST_CASE("every encoder, with or without <bos>, is scored on the same masked tokens") {
  const Corpus& corpus = test::shippedCorpus();
  std::vector<int32_t> stream(corpus.valid.begin(), corpus.valid.begin() + 3000);
  std::set<int64_t> counts;
  for (const auto& method : test::everyMethod()) {
    if (method.arch != "encoder") continue;
    for (bool bos : {false, true}) {
      INFO(method.pos << (bos ? " with <bos>" : ""));
      auto cfg = test::tinyConfig(method.pos, "encoder");
      cfg.bos = bos;
      cfg.vocabSize = corpus.vocab.size() + cfg.specialTokens();
      Transformer model(cfg);
      for (int64_t Lvalid : {16, 64}) {
        EncoderScoreOptions opt;
        opt.Lvalid = Lvalid;
        opt.mlm = model->config.mlmTokens(corpus.vocab);
        counts.insert(scoreEncoder(model, stream, opt).tokens);
      }
    }
  }
  CHECK(counts.size() == 1);
}

TEST_CASE("no label reaches an encoder's logits at its masked positions, on any attention path", "[attention-paths]") {
  // Every encoder position method, float32 and bfloat16, on every attention path an encoder can
  // take in this build (causal-skip is for decoders): test::labelLeak's batch, whose other rows
  // hold the targets, changes nothing at the masked positions; the fused CUDA kernel's check is in
  // gpu_checks. T = 40 leaves the block path several blocks of 7 rows.
  constexpr int64_t T = 40;
  std::vector<std::pair<std::string, ForwardOptions>> paths{{"planned", {}}};
  auto forced = [&](AttentionPath path, int64_t queryBlock) {
    ForwardOptions o;
    o.path = path;
    o.queryBlock = queryBlock;
    paths.push_back({attentionPathName(path) + " " + std::to_string(queryBlock), o});
  };
  forced(AttentionPath::Reference, 0);
  forced(AttentionPath::Block, 7);
  forced(AttentionPath::Recompute, 0);
  forced(AttentionPath::Recompute, 7);
  if (compat::kHasSdpa) forced(AttentionPath::Sdpa, 0);
  for (const auto& m : test::everyMethod()) {
    if (m.arch != "encoder") continue;
    Transformer fp32(test::tinyConfig(m.pos, m.arch));
    fp32->eval();
    test::spreadFirstTokenBias(fp32);
    Transformer bf16 = test::copyOnto(fp32, {torch::kCPU, torch::kBFloat16});
    for (auto* model : {&fp32, &bf16})
      for (const auto& [name, opt] : paths) {
        INFO(m.pos << " " << (model == &fp32 ? "float32" : "bfloat16") << " path " << name);
        test::LabelLeak leak = test::labelLeak(*model, T, opt, 17);
        INFO("masked change " << leak.masked << ", with the targets visible " << leak.visible);
        CHECK(leak.masked <= 1e-6);
        CHECK(leak.visible > 0.01);
      }
  }
}
