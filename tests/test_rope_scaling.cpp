// rope_scaling's inverse frequencies and attention factors against values worked out from
// transformers' formulas (modeling_rope_utils.py, main) independently of rope_scaling.cpp: by hand
// where short, else by a few lines of Python written from the formulas in float64 (math.log,
// math.floor, ** ; the numbers pasted below with repr's 17 digits). And the config reader
// (run/rope_config.h) on the config.json shapes of the families, and its one-line refusals; which
// --interp composes with which rope_scaling.
#include <catch2/catch.hpp>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "error_of.h"
#include "model/interpolation.h"
#include "model/position/rope_scaling.h"
#include "run/rope_config.h"

using namespace xtrap;
using nlohmann::json;
using xtrap::test::errorOf;

namespace {

void checkClose(const std::vector<double>& got, const std::vector<double>& expected, double relative = 1e-12) {
  REQUIRE(got.size() == expected.size());
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::abs(got[i] - expected[i]) / expected[i]);
  INFO("largest relative difference " << worst);
  CHECK(worst <= relative);
}

RopeScaling scaling(const std::string& type, double factor, int64_t original) {
  RopeScaling s;
  s.type = type, s.factor = factor, s.originalMaxPositions = original;
  return s;
}

RopeConfig read(const std::string& text, int64_t headDim = 64, const RopeConfigOptions& options = {}) {
  return readRopeConfig(json::parse(text), "config.json", headDim, options);
}

}  // namespace

TEST_CASE("rope default and linear: base^(-2i/d), divided by the factor") {
  // d = 8, base 10^4: 10^0, 10^-1, 10^-2, 10^-3.
  checkClose(ropeInverseFrequencies(RopeScaling{}, 1e4, 8, 100), {1.0, 0.1, 0.01, 0.001});
  checkClose(ropeInverseFrequencies(scaling("linear", 4.0, 0), 1e4, 8, 100), {0.25, 0.025, 0.0025, 0.00025});
  CHECK(ropeAttentionFactor(scaling("linear", 4.0, 0)) == 1.0);
}

TEST_CASE("rope dynamic: base grows past max_position_embeddings and resets below it") {
  RopeScaling s = scaling("dynamic", 2.0, 2048);
  // L = 4096: base' = 10^4 (2 * 4096 / 2048 - 1)^(8/6) = 10^4 * 3^(4/3) = 43267.487109222246;
  // inv_i = base'^(-i/4) (Python).
  checkClose(ropeInverseFrequencies(s, 1e4, 8, 4096),
             {1.0, 0.06933612743506347, 0.004807498567691361, 0.0003333333333333334});
  // At and below M the original frequencies, whatever came before.
  checkClose(ropeInverseFrequencies(s, 1e4, 8, 2048), {1.0, 0.1, 0.01, 0.001});
  checkClose(ropeInverseFrequencies(s, 1e4, 8, 100), {1.0, 0.1, 0.01, 0.001});
  CHECK(ropeAttentionFactor(s) == 1.0);
}

TEST_CASE("rope yarn: ramp between the correction bounds, attention factor from mscale") {
  // d = 16, base 10^4, factor 4, M = 2048: c(32) = 16 ln(2048 / 64 pi) / (2 ln 10^4) = 2.016,
  // c(1) = 5.026, so lo = 2, hi = 6 and r_i = (i - 2) / 4: pair 3 is 10^-1.5 (0.25 / 4 + 0.75).
  RopeScaling s = scaling("yarn", 4.0, 2048);
  checkClose(ropeInverseFrequencies(s, 1e4, 16, 100), {1.0, 0.31622776601683794, 0.1, 0.02569350598886808, 0.00625,
                                                       0.001383496476323666, 0.00025, 7.905694150420948e-05});
  SECTION("truncate false: the bounds 2.0160002112515443 and 5.026300167891356 unrounded") {
    s.truncate = false;
    checkClose(ropeInverseFrequencies(s, 1e4, 16, 100),
               {1.0, 0.31622776601683794, 0.1, 0.023870192321736323, 0.005056971521129435, 0.000811290381701431,
                0.00025, 7.905694150420948e-05});
  }
  SECTION("Qwen2.5-style: d = 128, base 10^6, factor 4, M = 32768 (lo 23, hi 40); pairs 0, 10, ..., 63") {
    auto inv = ropeInverseFrequencies(scaling("yarn", 4.0, 32768), 1e6, 128, 100);
    std::vector<double> picked;
    for (size_t i : {0, 10, 20, 30, 40, 50, 63}) picked.push_back(inv[i]);
    checkClose(picked, {1.0, 0.11547819846894582, 0.01333521432163324, 0.001064360981247002, 4.445698525097307e-05,
                        5.133812566142866e-06, 3.102344401879299e-07});
  }
  // 0.1 ln 4 + 1; (0.1 ln 4 + 1) / (0.05 ln 4 + 1) for mscale 1, mscale_all_dim 0.5; equal mscales
  // cancel (DeepSeek's); a given attention_factor wins; factor 1 gives 1.
  CHECK(ropeAttentionFactor(s) == Approx(1.138629436111989).epsilon(1e-14));
  s.mscale = 1.0, s.mscaleAllDim = 0.5;
  CHECK(ropeAttentionFactor(s) == Approx(1.0648216253695715).epsilon(1e-14));
  s.mscaleAllDim = 1.0;
  CHECK(ropeAttentionFactor(s) == Approx(1.0).epsilon(1e-14));
  s.attentionFactor = 0.7;
  CHECK(ropeAttentionFactor(s) == 0.7);
  CHECK(ropeAttentionFactor(scaling("yarn", 1.0, 2048)) == 1.0);
}

TEST_CASE("rope longrope: the whole window switches to the long factors past the original length") {
  RopeScaling s = scaling("longrope", 32.0, 4096);
  s.shortFactor = {1.0, 1.5, 2.0, 4.0};
  s.longFactor = {2.0, 3.0, 4.0, 8.0};
  checkClose(ropeInverseFrequencies(s, 1e4, 8, 4096), {1.0, 0.1 / 1.5, 0.01 / 2, 0.001 / 4});
  checkClose(ropeInverseFrequencies(s, 1e4, 8, 4097), {0.5, 0.1 / 3, 0.01 / 4, 0.001 / 8});
  // sqrt(1 + ln 32 / ln 4096) = sqrt(1 + 5/12) (Phi-3-mini-128k: 131072 / 4096).
  CHECK(ropeAttentionFactor(s) == Approx(std::sqrt(17.0 / 12.0)).epsilon(1e-14));
  s.factor = 1.0;
  CHECK(ropeAttentionFactor(s) == 1.0);
  s.attentionFactor = 1.25;
  CHECK(ropeAttentionFactor(s) == 1.25);
}

TEST_CASE("rope llama3: Llama-3.2-1B's frequencies (base 5e5, d 64, factor 32, low 1, high 4, M 8192)") {
  RopeScaling s = scaling("llama3", 32.0, 8192);
  // Python from the formula: wavelength < 2048 kept, > 8192 divided by 32, smoothed between
  // (pair 15: wavelength 2948, s = (8192 / 2948 - 1) / 3 = 0.593).
  checkClose(ropeInverseFrequencies(s, 5e5, 64, 100), {1.0,
                                                       0.6636012376960885,
                                                       0.44036660267178046,
                                                       0.2922278225730151,
                                                       0.19392274474868576,
                                                       0.12868737343265052,
                                                       0.08539710028576561,
                                                       0.05666962144529105,
                                                       0.03760603093086393,
                                                       0.024955408670558694,
                                                       0.016560440080994446,
                                                       0.010989528534539826,
                                                       0.007292664737217109,
                                                       0.004839421345719893,
                                                       0.003211445994752591,
                                                       0.001290547928209264,
                                                       0.00042955679655936815,
                                                       9.70828780262767e-05,
                                                       1.9461638184831125e-05,
                                                       1.291476718704739e-05,
                                                       8.570255489881478e-06,
                                                       5.687232150457046e-06,
                                                       3.7740542941082826e-06,
                                                       2.5044671007024935e-06,
                                                       1.6619674677953088e-06,
                                                       1.102883668639601e-06,
                                                       7.318749675440419e-07,
                                                       4.856731343010108e-07,
                                                       3.2229329303788936e-07,
                                                       2.1387422816109149e-07,
                                                       1.4192720251899592e-07,
                                                       9.41830672543491e-08});
  CHECK(ropeAttentionFactor(s) == 1.0);
}

TEST_CASE("RopeScaling::validate refuses what the formulas cannot take, in one line") {
  auto errorFor = [](RopeScaling s, int64_t d = 8) { return errorOf([&] { s.validate(d); }); };
  CHECK(errorFor(RopeScaling{}) == "");
  CHECK(errorFor(scaling("ntk", 2.0, 0)) ==
        "unknown rope_scaling type 'ntk' (valid: default, linear, dynamic, yarn, longrope, llama3)");
  CHECK(errorFor(scaling("linear", 0.5, 0)) == "rope_scaling linear: factor must be >= 1, got 0.5");
  CHECK(errorFor(scaling("yarn", 4.0, 0)) == "rope_scaling yarn: needs original_max_position_embeddings");
  CHECK(errorFor(scaling("dynamic", 2.0, 0)) == "rope_scaling dynamic: needs max_position_embeddings");
  CHECK(errorFor(scaling("dynamic", 2.0, 512), 2).find("more than 2 rotated channels") != std::string::npos);
  RopeScaling y = scaling("yarn", 4.0, 2048);
  y.betaFast = 0.5;
  CHECK(errorFor(y) == "rope_scaling yarn: beta_fast 0.5 must be >= beta_slow 1");
  RopeScaling l = scaling("longrope", 32.0, 4096);
  l.shortFactor = {1, 1, 1, 1}, l.longFactor = {1, 1, 1};
  CHECK(errorFor(l) == "rope_scaling longrope: long_factor must have 4 entries (rotated channels / 2), got 3");
  l.longFactor = {1, 1, 0, 1};
  CHECK(errorFor(l) == "rope_scaling longrope: long_factor entries must be > 0, got 0");
  RopeScaling ll = scaling("llama3", 8.0, 8192);
  ll.lowFreqFactor = 4.0;
  CHECK(errorFor(ll) == "rope_scaling llama3: low_freq_factor 4 must be below high_freq_factor 4");
  for (const std::string& e : {errorFor(l), errorFor(ll), errorFor(y)}) CHECK(e.find('\n') == std::string::npos);
}

TEST_CASE("RopeScaling's JSON keeps every field") {
  RopeScaling s = scaling("longrope", 32.0, 4096);
  s.shortFactor = {1, 2}, s.longFactor = {3, 4}, s.attentionFactor = 1.2, s.truncate = false;
  s.betaFast = 16, s.betaSlow = 2, s.mscale = 0.7, s.mscaleAllDim = 0.5, s.lowFreqFactor = 2, s.highFreqFactor = 3;
  RopeScaling back = json(s).get<RopeScaling>();
  CHECK(json(back) == json(s));
}

TEST_CASE("readRopeConfig: the families' config.json shapes") {
  SECTION("Llama 3.2 (4.x rope_scaling, rope_type)") {
    RopeConfig r = read(R"({"rope_theta": 500000.0, "max_position_embeddings": 131072, "rope_scaling":
      {"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
       "original_max_position_embeddings": 8192, "rope_type": "llama3"}})");
    CHECK(r.base == 5e5);
    CHECK(r.scaling.type == "llama3");
    CHECK(r.scaling.factor == 32.0);
    CHECK(r.scaling.originalMaxPositions == 8192);
    CHECK(r.scaling.highFreqFactor == 4.0);
    CHECK(r.localBase == 0.0);
  }
  SECTION("Qwen2.5 yarn with the old `type` key") {
    RopeConfig r = read(R"({"rope_theta": 1000000.0, "max_position_embeddings": 32768, "rope_scaling":
      {"factor": 4.0, "original_max_position_embeddings": 32768, "type": "yarn"}})");
    CHECK(r.scaling.type == "yarn");
    CHECK(r.scaling.factor == 4.0);
    CHECK(r.scaling.originalMaxPositions == 32768);
    CHECK(r.scaling.betaFast == 32.0);
    CHECK(r.scaling.betaSlow == 1.0);
    CHECK(r.scaling.truncate);
  }
  SECTION("Phi-3 longrope: top-level original length, factor from the two lengths, partial rotary") {
    RopeConfig r = read(R"({"max_position_embeddings": 131072, "original_max_position_embeddings": 4096,
      "partial_rotary_factor": 0.5, "rope_scaling": {"type": "su", "short_factor": [1, 1, 1, 1, 1, 1, 1, 1],
      "long_factor": [2, 2, 2, 2, 2, 2, 2, 2], "original_max_position_embeddings": 2048}})",
                        32);
    CHECK(r.scaling.type == "longrope");
    CHECK(r.scaling.originalMaxPositions == 4096);
    CHECK(r.scaling.factor == 32.0);
    CHECK(r.rotaryFraction == 0.5);
    CHECK(r.base == 10000.0);
    CHECK(ropeAttentionFactor(r.scaling) == Approx(std::sqrt(17.0 / 12.0)).epsilon(1e-14));
  }
  SECTION("5.x rope_parameters with rope_theta inside; dynamic's length is max_position_embeddings") {
    RopeConfig r = read(R"({"max_position_embeddings": 2048, "rope_theta": 7.0, "rope_parameters":
      {"rope_type": "dynamic", "factor": 2.0, "rope_theta": 10000.0, "original_max_position_embeddings": 1024}})");
    CHECK(r.base == 10000.0);
    CHECK(r.scaling.type == "dynamic");
    CHECK(r.scaling.originalMaxPositions == 2048);
  }
  SECTION("Gemma 3: 4.x rope_local_base_freq; 5.x per-layer-type rope_parameters") {
    RopeConfig old = read(R"({"rope_theta": 1000000.0, "rope_local_base_freq": 10000.0,
      "rope_scaling": {"factor": 8.0, "rope_type": "linear"}})",
                          256, {1e6});
    CHECK(old.base == 1e6);
    CHECK(old.localBase == 1e4);
    CHECK(old.scaling.type == "linear");
    RopeConfig v5 = read(R"({"rope_parameters": {"full_attention": {"rope_type": "linear", "factor": 8.0,
      "rope_theta": 1000000.0}, "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}}})",
                         256);
    CHECK(v5.base == 1e6);
    CHECK(v5.localBase == 1e4);
    CHECK(v5.scaling.factor == 8.0);
  }
  SECTION("no rope settings: the family's default theta, no scaling") {
    RopeConfig r = read(R"({"rope_scaling": null})", 64, {1e5});
    CHECK(r.base == 1e5);
    CHECK(r.scaling.isDefault());
  }
}

TEST_CASE("readRopeConfig refuses a hostile rope config in one line naming the file and key") {
  auto errorFor = [](const std::string& text, int64_t headDim = 8) { return errorOf([&] { read(text, headDim); }); };
  CHECK(errorFor(R"({"rope_scaling": {"rope_type": "magic", "factor": 2}})") ==
        "config.json: unknown rope_scaling type 'magic' (valid: default, linear, dynamic, yarn, longrope, llama3)");
  CHECK(errorFor(R"({"rope_scaling": {"type": "linear", "factor": 0.25}})") ==
        "config.json: rope_scaling linear: factor must be >= 1, got 0.25");
  CHECK(errorFor(R"({"rope_scaling": {"type": "linear", "factor": "4"}})") ==
        "config.json: rope_scaling.factor must be a number, got \"4\"");
  CHECK(errorFor(R"({"rope_scaling": {"type": "linear"}})") == "config.json: rope_scaling.factor is missing");
  CHECK(errorFor(R"({"rope_scaling": {"rope_type": "llama3", "factor": 8, "low_freq_factor": 1,
      "high_freq_factor": 4}})") == "config.json: max_position_embeddings is missing (rope type llama3 needs it)");
  CHECK(errorFor(R"({"max_position_embeddings": 4096, "rope_scaling": {"rope_type": "llama3", "factor": 8,
      "low_freq_factor": 4, "high_freq_factor": 1}})") ==
        "config.json: rope_scaling llama3: low_freq_factor 4 must be below high_freq_factor 1");
  CHECK(errorFor(R"({"max_position_embeddings": 4096, "rope_parameters": {"rope_type": "longrope",
      "short_factor": [1, 1], "long_factor": [1, 1, 1, 1]}})") ==
        "config.json: rope_scaling longrope: short_factor must have 4 entries (rotated channels / 2), got 2 "
        "(rope_parameters)");
  CHECK(errorFor(R"({"max_position_embeddings": 4096, "rope_scaling": {"rope_type": "yarn", "factor": 4,
      "original_max_position_embeddings": -5}})") ==
        "config.json: rope_scaling.original_max_position_embeddings must be a positive integer, got -5");
  CHECK(errorFor(R"({"rope_scaling": {"rope_type": "default", "mrope_section": [2, 2]}})") ==
        "config.json: rope_scaling.mrope_section is not supported");
  CHECK(errorFor(R"({"rope_theta": -1})") == "config.json: rope_theta must be > 1");
  CHECK(errorFor(R"({"rope_scaling": [1, 2]})") == "config.json: rope_scaling must be an object");
  CHECK(errorFor(R"({"rope_parameters": {"full_attention": {"rope_type": "default"}, "sliding_attention":
      {"rope_type": "yarn", "factor": 2}}})") ==
        "config.json: rope_parameters.sliding_attention.rope_type 'yarn' is not supported (unscaled only)");
}

TEST_CASE("interpolation on a checkpoint's rope scaling: the pairs with a meaning and one-line refusals of the rest") {
  // Rows: none linear ntk dynamic-ntk yarn dynamic-yarn; 1 = composes (docs/pretrained.md's table).
  const std::map<std::string, std::vector<int>> composes{
      {"default", {1, 1, 1, 1, 1, 1}}, {"linear", {1, 1, 1, 1, 1, 1}},  {"yarn", {1, 1, 0, 0, 0, 0}},
      {"llama3", {1, 1, 0, 0, 0, 0}},  {"dynamic", {1, 0, 0, 0, 0, 0}}, {"longrope", {1, 0, 0, 0, 0, 0}}};
  for (const auto& [type, row] : composes)
    for (size_t i = 0; i < interpNames().size(); ++i) {
      Interp interp = parseInterp(interpNames()[i]);
      std::string error = errorOf([&] { checkInterpolationComposes(interp, scaling(type, 2.0, 1024)); });
      INFO(type << " with --interp " << interpNames()[i] << ": " << error);
      CHECK(error.empty() == bool(row[i]));
    }
  CHECK(errorOf([] { checkInterpolationComposes(Interp::Yarn, scaling("llama3", 32.0, 8192)); }) ==
        "--interp yarn has no defined meaning on a checkpoint with llama3 rope scaling (its frequencies are already "
        "rescaled pair by pair from the base); use linear or none");
  CHECK(errorOf([] { checkInterpolationComposes(Interp::Linear, scaling("longrope", 32.0, 4096)); }) ==
        "--interp linear has no defined meaning on a checkpoint with longrope rope scaling (its frequencies follow "
        "the window's length, and positions / a would change which); use none");
}

TEST_CASE("ropeScalingJson is read back by readRopeConfig as the same scaling, for every type") {
  std::vector<RopeScaling> cases;
  cases.push_back(scaling("linear", 4.0, 0));
  cases.push_back(scaling("dynamic", 2.0, 256));
  RopeScaling yarn = scaling("yarn", 8.0, 512);
  yarn.betaFast = 16, yarn.betaSlow = 2, yarn.mscale = 0.7, yarn.mscaleAllDim = 0.5, yarn.truncate = false;
  cases.push_back(yarn);
  yarn.mscale = yarn.mscaleAllDim = 0, yarn.attentionFactor = 1.25, yarn.truncate = true;
  cases.push_back(yarn);
  RopeScaling llama3 = scaling("llama3", 8.0, 8192);
  llama3.lowFreqFactor = 1, llama3.highFreqFactor = 4;
  cases.push_back(llama3);
  RopeScaling longrope = scaling("longrope", 4.0, 1024);
  longrope.shortFactor = {1, 1, 1, 1}, longrope.longFactor = {1, 2, 4, 8};
  cases.push_back(longrope);
  for (const RopeScaling& s : cases) {
    INFO(s.type);
    // A dynamic scaling takes its M from max_position_embeddings, which the writer's caller sets.
    json config{{"rope_scaling", ropeScalingJson(s)},
                {"max_position_embeddings", s.type == "dynamic" ? s.originalMaxPositions : 4096}};
    CHECK(readRopeConfig(config, "config.json", 8).scaling == s);
  }
}
