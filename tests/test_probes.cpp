// Probes read back through the HDF5 C API: the bias dump equals the spec formula for every
// variant; attention dumps have the documented layout, rows that sum to 1, causal zeros, maps
// equal to the in-memory attention and statistics recomputable from the maps.
#include <hdf5.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>

#include "attention_dump.h"
#include "bias_dump.h"
#include "data/wikitext.h"
#include "model/linear_bias_spec.h"
#include "run/checkpoint.h"
#include "test_support.h"

using namespace xtrap;
namespace fs = std::filesystem;

namespace {
struct H5Read {
  explicit H5Read(const fs::path& p) : file(H5Fopen(p.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT)) { REQUIRE(file >= 0); }
  ~H5Read() { H5Fclose(file); }
  std::vector<hsize_t> dims(const std::string& name) const {
    hid_t ds = H5Dopen2(file, name.c_str(), H5P_DEFAULT);
    REQUIRE(ds >= 0);
    hid_t space = H5Dget_space(ds);
    std::vector<hsize_t> d(static_cast<size_t>(H5Sget_simple_extent_ndims(space)));
    H5Sget_simple_extent_dims(space, d.data(), nullptr);
    H5Sclose(space);
    H5Dclose(ds);
    return d;
  }
  torch::Tensor floats(const std::string& name) const {
    auto d = dims(name);
    std::vector<int64_t> shape(d.begin(), d.end());
    auto t = torch::empty(shape, torch::kFloat32);
    hid_t ds = H5Dopen2(file, name.c_str(), H5P_DEFAULT);
    REQUIRE(H5Dread(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, t.data_ptr<float>()) >= 0);
    H5Dclose(ds);
    return t;
  }
  double attrDouble(const std::string& name) const {
    double v = 0;
    hid_t a = H5Aopen(file, name.c_str(), H5P_DEFAULT);
    REQUIRE(a >= 0);
    H5Aread(a, H5T_NATIVE_DOUBLE, &v);
    H5Aclose(a);
    return v;
  }
  hid_t file;
};
}  // namespace

TEST_CASE("bias dump (--dump-bias) writes the formula's matrix and per-head parameters for every variant") {
  struct Case {
    std::string pos, arch;
    int64_t heads;
  };
  for (Case c :
       {Case{"alibi", "decoder", 6}, Case{"alibi", "encoder", 8}, Case{"alibi-offset", "encoder", 5},
        Case{"alibi-onesided", "encoder", 4}, Case{"alibi-learned", "encoder", 12}, Case{"bialibi", "encoder", 4}}) {
    INFO(c.arch << " " << c.pos << " H=" << c.heads);
    auto cfg = test::tinyConfig(c.pos, c.arch, c.heads);
    cfg.dModel = 2 * c.heads;
    Transformer model(cfg);
    auto file = fs::temp_directory_path() / "xtrap-test-bias.h5";
    dumpBias(model, 9, file);
    H5Read h5(file);
    auto bias = h5.floats("bias");
    REQUIRE(bias.sizes() == torch::IntArrayRef({c.heads, 9, 9}));
    LinearBiasSpec spec = makeLinearBiasSpec(parsePositionMethod(c.pos), c.heads, c.arch == "decoder");
    for (int64_t h = 0; h < c.heads; ++h)
      for (int64_t i = 0; i < 9; ++i)
        for (int64_t j = 0; j < 9; ++j) {
          double expected = spec.bias(h, i, j, 0.0);  // learned biases start at 0
          double got = bias[h][i][j].item<double>();
          if (std::isinf(expected))
            CHECK(got == expected);
          else
            CHECK(got == Approx(expected).margin(1e-6));
        }
    auto past = h5.floats("slope_past");
    for (int64_t h = 0; h < c.heads; ++h) CHECK(past[h].item<double>() == Approx(spec.slopePast[h]).margin(1e-6));
    CHECK(h5.dims("first_token_bias") == std::vector<hsize_t>{hsize_t(c.heads)});
  }
}

TEST_CASE("bialibi: dumped and printed bias = the first-token bias in row 0 and column 0, distances elsewhere") {
  auto cfg = test::tinyConfig("bialibi", "encoder", 2);  // slopes 1/16, 1/256
  cfg.dModel = 4;
  Transformer model(cfg);
  {
    torch::NoGradGuard g;
    model->linearBias()->firstTokenBias().copy_(torch::tensor({0.5f, -0.25f}));
  }
  auto file = fs::temp_directory_path() / "xtrap-test-bialibi-bias.h5";
  dumpBias(model, 6, file);
  auto bias = H5Read(file).floats("bias");
  for (int64_t k = 0; k < 6; ++k) {
    CHECK(bias[0][0][k].item<double>() == Approx(0.5));  // replaces -k/16, not added to it
    CHECK(bias[0][k][0].item<double>() == Approx(0.5));
    CHECK(bias[1][0][k].item<double>() == Approx(-0.25));
    CHECK(bias[1][k][0].item<double>() == Approx(-0.25));
  }
  CHECK(bias[0][2][5].item<double>() == Approx(-3.0 / 16));
  CHECK(bias[1][4][1].item<double>() == Approx(-3.0 / 256));
  auto printed = formatBiasMatrix(attentionBiasMatrix(model, 3));
  CHECK(printed.find("head 0\n       0.5       0.5       0.5\n       0.5         0   -0.0625\n") != std::string::npos);
}

namespace {
// Captures full attention probabilities per layer from a full-matrix forward.
struct Capture : AttentionObserver {
  std::map<int64_t, torch::Tensor> probs;
  void onProbabilities(int64_t layer, int64_t, const torch::Tensor& p) override { probs[layer] = p[0].clone(); }
};
}  // namespace

TEST_CASE("attention dump (--dump-attn): layout, normalisation, causality, equality with the model and stats") {
  Corpus corpus = loadWikiText(XTRAP_DEFAULT_DATA_DIR);
  for (std::string arch : {"decoder", "encoder"}) {
    INFO(arch);
    auto cfg = test::tinyConfig(arch == "decoder" ? "alibi" : "alibi-offset", arch);
    RunInfo run = test::trainTiny("probe-" + arch, cfg, 3);
    Transformer model = loadTrainedModel(run);
    const int64_t N = 40, offset = 123;
    for (StoredFloat dtype : {StoredFloat::Float32, StoredFloat::Float16}) {
      AttentionDumpRequest req;
      req.out = run.dir / "attn.h5";
      req.Lvalid = N;
      req.offset = offset;
      req.queryBlock = 16;
      req.dtype = dtype;
      req.heads = {1, 3};
      dumpAttention(run, model, corpusProbeText(std::make_shared<const Corpus>(corpus), "valid"), req);
      H5Read h5(req.out);
      CHECK(h5.attrDouble("Lvalid") == N);
      CHECK(h5.attrDouble("offset") == offset);
      CHECK(h5.dims("tokens") == std::vector<hsize_t>{N});
      CHECK(h5.dims("words") == std::vector<hsize_t>{N});
      CHECK(h5.dims("stats/entropy") == std::vector<hsize_t>{2, 4, N});
      auto attn = h5.floats("layer_01/attn");
      REQUIRE(attn.sizes() == torch::IntArrayRef({2, N, N}));
      double tol = dtype == StoredFloat::Float16 ? 1e-3 : 1e-5;
      CHECK(test::maxAbsDiff(attn.sum(-1), torch::ones({2, N})) <= tol);
      if (arch == "decoder") CHECK(attn.triu(1).abs().max().item<double>() == 0.0);
      // the same window through the full-matrix path, captured in memory
      Capture capture;
      torch::NoGradGuard g;
      std::vector<int64_t> ids(corpus.valid.begin() + offset, corpus.valid.begin() + offset + N);
      model->features(torch::tensor(ids).unsqueeze(0), {0, &capture});
      auto expected = capture.probs[1].index_select(0, torch::tensor({1, 3}));
      CHECK(test::maxAbsDiff(attn, expected) <= (dtype == StoredFloat::Float16 ? 1e-3 : 1e-6));
      if (dtype == StoredFloat::Float32) {
        auto probs = capture.probs[0].to(torch::kFloat64);  // all heads of layer 0
        auto i = torch::arange(N, torch::kFloat64).unsqueeze(1), j = torch::arange(N, torch::kFloat64).unsqueeze(0);
        auto entropy = -(probs * torch::where(probs > 0, probs.log(), torch::zeros_like(probs))).sum(-1);
        auto distance = (probs * (i - j).abs()).sum(-1);
        CHECK(test::maxAbsDiff(h5.floats("stats/entropy")[0], entropy) < 1e-4);
        CHECK(test::maxAbsDiff(h5.floats("stats/mean_distance")[0], distance) < 1e-3);
        CHECK(test::maxAbsDiff(h5.floats("stats/first_token_mass")[0], probs.select(2, 0)) < 1e-5);
      }
    }
  }
}

TEST_CASE("an interrupted dump leaves no file under the final name") {
  Corpus corpus = loadWikiText(XTRAP_DEFAULT_DATA_DIR);
  RunInfo run = test::trainTiny("probe-bad", test::tinyConfig("alibi"), 2);
  Transformer model = loadTrainedModel(run);
  AttentionDumpRequest req;
  req.out = run.dir / "bad.h5";
  req.Lvalid = 20;
  req.layers = {7};  // no such layer: fails before anything is written
  CHECK_THROWS_WITH(dumpAttention(run, model, corpusProbeText(std::make_shared<const Corpus>(corpus), "valid"), req),
                    Catch::Contains("no layer 7"));
  CHECK_FALSE(fs::exists(req.out));
  for (const auto& e : fs::directory_iterator(run.dir))
    CHECK(e.path().filename().string().find("bad.h5") == std::string::npos);
}

TEST_CASE("bias dump of KERPLE-log and FIRE: their parameters, and the matrix they give") {
  auto file = fs::temp_directory_path() / "xtrap-test-bias-learned.h5";
  {
    auto cfg = test::tinyConfig("kerple-log", "decoder", 3);
    cfg.dModel = 6;
    Transformer model(cfg);
    dumpBias(model, 9, file);
    H5Read h5(file);
    auto bias = h5.floats("bias"), r1 = h5.floats("r1"), r2 = h5.floats("r2");
    REQUIRE(r1.numel() == 3);
    for (int64_t h = 0; h < 3; ++h)
      for (int64_t i = 0; i < 9; ++i)
        for (int64_t j = 0; j < 9; ++j) {
          double got = bias[h][i][j].item<double>();
          if (j > i)
            CHECK(std::isinf(got));  // the causal mask
          else
            CHECK(got ==
                  Approx(-r1[h].item<double>() * std::log(1.0 + r2[h].item<double>() * double(i - j))).epsilon(1e-5));
        }
  }
  {
    auto cfg = test::tinyConfig("fire", "encoder", 2);
    cfg.dModel = 4;
    Transformer model(cfg);
    dumpBias(model, 9, file);
    H5Read h5(file);
    CHECK(h5.floats("c")[0].item<double>() == Approx(0.1));
    CHECK(h5.floats("threshold")[0].item<double>() == Approx(double(cfg.contextLength)));
    torch::NoGradGuard g;
    auto expected = model->attentionBias()->block(0, 9, 0, 9);
    CHECK((h5.floats("bias") - expected).abs().max().item<double>() < 1e-6);
  }
  fs::remove(file);
}
