// Scenario files: the grammar, the errors (with the key's name and line), the shipped files.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "scenario/results_table.h"
#include "scenario/run_identity.h"
#include "scenario/scenario.h"

using namespace xtrap;

namespace {
const char* kMinimal = R"(description = "two variants"
[train]
arch = "decoder"
L = 64
steps = 10
batch = 4

[[variant]]
name = "alibi"
pos = "alibi"

[[variant]]
name = "sin-long"
pos = "rotary"
steps = 30
lr = 5e-4

[eval]
lvalid = "64..256"
modes = ["nonoverlap", "sliding"]
strides = [16, 32]
interps = ["none", "linear"]
max_tokens = 1000
)";

Scenario parse(const std::string& text) { return parseScenario(text, "test.toml", "/base"); }

std::string errorOf(const std::string& text) {
  try {
    parse(text);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST_CASE("scenario: train block, variant overrides, eval block") {
  Scenario s = parse(kMinimal);
  CHECK(s.name == "test");
  CHECK(s.description == "two variants");
  REQUIRE(s.variants.size() == 2);
  CHECK(s.variants[0].model.pos == "alibi");
  CHECK(s.variants[0].model.contextLength == 64);
  CHECK(s.variants[0].train.steps == 10);
  CHECK(s.variants[1].model.pos == "rotary");
  CHECK(s.variants[1].train.steps == 30);
  CHECK(s.variants[1].train.lr == Approx(5e-4));
  CHECK(s.variants[1].train.batchSequences == 4);
  REQUIRE(s.evals.size() == 1);
  CHECK(s.evals[0].lvalids == std::vector<int64_t>{64, 128, 256});
  CHECK(s.evals[0].modes == std::vector<std::string>{"nonoverlap", "sliding"});
  CHECK(s.evals[0].strides == std::vector<int64_t>{16, 32});
  CHECK(s.evals[0].interps == std::vector<Interp>{Interp::None, Interp::Linear});
  CHECK(s.evals[0].maxTokens == 1000);
  CHECK_FALSE(s.hasProbe);
  CHECK(s.select({}).size() == 2);
  CHECK(s.select({"sin-long"}).front()->name == "sin-long");
}

TEST_CASE("scenario: named config first then overrides, relative data paths, eval arrays") {
  Scenario s = parse(R"([train]
data = "../data/wt2"
L = 32
[[variant]]
name = "zero-clap-symmetric"
pos = "alibi"
config = "zero-clap"
[[eval]]
lvalid = [128, 32, 64, 32]
[[eval]]
lvalid = "32"
variants = ["zero-clap-symmetric"]
[probe]
bias_len = 8
)");
  const auto& m = s.variants[0].model;
  CHECK(m.arch == "encoder");
  CHECK(m.head == "clap");
  CHECK(m.pos == "alibi");  // the override wins although it comes before `config`
  CHECK(s.variants[0].train.dataDir == "/data/wt2");
  REQUIRE(s.evals.size() == 2);
  CHECK(s.evals[0].lvalids == std::vector<int64_t>{32, 64, 128});
  CHECK(s.evals[1].variants == std::vector<std::string>{"zero-clap-symmetric"});
  CHECK(s.hasProbe);
  CHECK(s.probe.biasLen == 8);
}

TEST_CASE("scenario: unknown keys are errors naming the key and its line") {
  std::string text = kMinimal;
  CHECK(errorOf(std::string(text).insert(text.find("steps = 10"), "stepz = 3\n")) ==
        "test.toml:5:1: unknown key 'stepz' in [train]");
  CHECK(errorOf(std::string(text).insert(text.find("lr = 5e-4"), "lrr = 1\n")) ==
        "test.toml:16:1: unknown key 'lrr' in [[variant]] 'sin-long'");
  CHECK(errorOf(std::string(text) + "stride = 3\n") == "test.toml:24:1: unknown key 'stride' in [eval]");
  CHECK(errorOf(std::string("titel = \"x\"\n") + text) ==
        "test.toml:1:1: unknown key 'titel' in the scenario (top level)");
}

TEST_CASE("scenario: bad values name the key and where it is") {
  std::string text = kMinimal;
  auto replaced = [&](const std::string& from, const std::string& to) {
    std::string t = text;
    return t.replace(t.find(from), from.size(), to);
  };
  CHECK(errorOf(replaced("L = 64", "L = \"64\"")) == "test.toml:4:5: L: expected an integer");
  CHECK_THAT(errorOf(replaced("pos = \"alibi\"", "pos = \"alibii\"")),
             Catch::StartsWith("test.toml:8:1: variant 'alibi': ") && Catch::Contains("alibii"));
  CHECK_THAT(errorOf(replaced("\"64..256\"", "\"256..64\"")), Catch::StartsWith("test.toml:19:10: lvalid: "));
  CHECK(errorOf(replaced("\"sliding\"]", "\"slide\"]")) ==
        "test.toml:20:9: modes: unknown mode 'slide' (valid: nonoverlap, sliding, pll)");
  CHECK_THAT(errorOf(replaced("\"linear\"", "\"cubic\"")), Catch::StartsWith("test.toml:22:11: interps: "));
  CHECK(errorOf(replaced("name = \"sin-long\"", "name = \"alibi\"")) ==
        "test.toml:13:8: name: duplicate variant 'alibi'");
  CHECK(errorOf(replaced("name = \"sin-long\"", "name = \"a b\"")) ==
        "test.toml:13:8: name: use letters, digits, '.', '_' and '-' (up to 64), got 'a b'");
  CHECK(errorOf(text + "variants = [\"nope\"]\n") == "test.toml:24:12: variants: no variant named 'nope'");
  CHECK_THAT(errorOf("[train]\nL = 3\n[eval]\nlvalid = \"3\"\n"), Catch::Contains("[[variant]]"));
  CHECK_THAT(errorOf("[train\n"), Catch::StartsWith("test.toml:1:"));
}

TEST_CASE("scenario: errors stay on one line when the text quoted has control characters") {
  // fuzz_scenario's finding: toml++ quotes the offending text, here "f" and the newline after it.
  CHECK(errorOf("[train]\nheads = f\n") == "test.toml:2:10: Error while parsing boolean: expected 'false', saw 'f\\n'");
  CHECK(errorOf("[train]\npos = \"a\\tb\"\n[[variant]]\nname = \"x\"\n[eval]\nlvalid = \"8\"\n") ==
        "test.toml:3:1: variant 'x': unknown position method 'a\\x09b' (valid: none, sinusoidal, learned, rotary, t5, "
        "alibi, alibi-offset, alibi-onesided, alibi-learned, bialibi, kerple-log, fire)");
}

TEST_CASE("scenario: every shipped scenario parses") {
  namespace fs = std::filesystem;
  int count = 0;
  for (const auto& entry : fs::directory_iterator("scenarios")) {
    if (entry.path().extension() != ".toml") continue;
    INFO(entry.path().string());
    // A scenario naming a pretrained model parses only where the model is: elsewhere one line
    // naming the directory (scenarios/bloom-ntk.toml names models/bloom-1b7).
    std::string absent;
    try {
      loadScenario(entry.path());
    } catch (const std::invalid_argument& e) {
      absent = e.what();
    }
    if (!absent.empty()) {
      CHECK_THAT(absent, Catch::Contains(": model: no model directory "));
      CHECK(absent.find('\n') == std::string::npos);
      ++count;
      continue;
    }
    Scenario s = loadScenario(entry.path());
    CHECK(s.name == entry.path().stem().string());
    CHECK_FALSE(s.variants.empty());
    ++count;
  }
  CHECK(count >= 1);
}

TEST_CASE("scenario: device and dtype keys, checked where they are written") {
  Scenario s = parse(std::string(kMinimal).insert(std::string(kMinimal).find("steps = 30"),
                                                  "device = \"cpu\"\ndtype = \"bfloat16\"\n"));
  CHECK(s.variants[0].train.device == "auto");  // defaults: resolved by the runner
  CHECK(s.variants[0].train.dtype == "float32");
  CHECK(s.variants[1].train.device == "cpu");
  CHECK(s.variants[1].train.dtype == "bfloat16");
  std::string text = kMinimal;
  CHECK(errorOf(std::string(text).insert(text.find("steps = 10"), "device = \"gpu\"\n")) ==
        "test.toml:5:10: device: unknown device 'gpu' (valid: auto | cpu | cuda)");
  CHECK(errorOf(std::string(text).insert(text.find("lr = 5e-4"), "dtype = \"float16\"\n")) ==
        "test.toml:16:9: dtype: unknown dtype 'float16' (valid: float32 | bfloat16)");
  CHECK(errorOf(std::string(text).insert(text.find("steps = 10"), "dtype = 16\n")) ==
        "test.toml:5:9: dtype: expected a string");
}

namespace {
// scenarios/smoke.toml's settings. The directory names below are what xtrap gave these variants
// before device and dtype existed (the runIdentity of git e381e8d, compiled and run on this file).
const char* kSmokeBeforeDevices = R"([train]
data = "../data/wikitext-2"
arch = "decoder"
L = 32
layers = 1
d_model = 32
heads = 4
ffn = 64
adaptive_softmax_cutoffs = [2000, 10000]
steps = 40
batch = 8
warmup = 5
eval_every = 0
eval_tokens = 2048
checkpoint_every = 10
threads = 2
[[variant]]
name = "alibi"
pos = "alibi"
[[variant]]
name = "sinusoidal"
pos = "sinusoidal"
[eval]
lvalid = "32..128"
)";

// What the scenario runner does first: auto resolved, here to the CPU (no GPU).
ScenarioVariant resolvedOnCpu(ScenarioVariant v) {
  if (v.train.device == "auto") v.train.device = "cpu";
  return v;
}
}  // namespace

TEST_CASE("run identity: existing runs keep their directory, cuda and bfloat16 runs get their own") {
  Scenario s = parse(kSmokeBeforeDevices);
  ScenarioVariant alibi = resolvedOnCpu(s.variants[0]), sinusoidal = resolvedOnCpu(s.variants[1]);
  // A default float32 CPU variant's identity is the one it had before the keys existed.
  nlohmann::json id = runIdentity(alibi.model, alibi.train);
  CHECK_FALSE(id["train"].contains("device"));
  CHECK_FALSE(id["train"].contains("dtype"));
  CHECK_FALSE(id["train"].contains("threads"));
  CHECK(id["train"]["data"] == "wikitext-2");
  CHECK(variantRunDir("runs/scenarios", alibi) == "runs/scenarios/decoder-alibi-L32-3b2776f53ef4");
  CHECK(variantRunDir("runs/scenarios", sinusoidal) == "runs/scenarios/decoder-sinusoidal-L32-5174e99afcda");

  ScenarioVariant bf16 = alibi, cuda = alibi;
  bf16.train.dtype = "bfloat16";
  cuda.train.device = "cuda";
  CHECK(runIdentity(bf16.model, bf16.train)["train"]["dtype"] == "bfloat16");
  CHECK(runIdentity(cuda.model, cuda.train)["train"]["device"] == "cuda");
  CHECK(variantRunDir("r", bf16) != variantRunDir("r", alibi));
  CHECK(variantRunDir("r", cuda) != variantRunDir("r", alibi));
  CHECK(variantRunDir("r", cuda) != variantRunDir("r", bf16));
  // auto would hash differently on a machine with a GPU than without: the runner resolves it first.
  CHECK_THROWS_AS(runIdentity(s.variants[0].model, s.variants[0].train), std::logic_error);
}

TEST_CASE("results table: rows = variants, columns = Lvalid, last/first ratio") {
  auto row = [](std::string run, int64_t Lvalid, double ppl, std::string interp = "none") {
    EvalRow r;
    r.run = run;
    r.Lvalid = Lvalid;
    r.ppl = ppl;
    r.interp = interp;
    return r;
  };
  std::string t =
      formatMarkdownTable("nonoverlap", {row("alibi", 64, 100), row("alibi", 128, 90), row("sin", 64, 100)});
  CHECK(t ==
        "### nonoverlap\n\n| variant | 64 | 128 | ppl(128)/ppl(64) |\n|---|---:|---:|---:|\n"
        "| alibi | 100.00 | 90.00 | 0.900 |\n| sin | 100.00 | - | - |\n\n");
  std::string two = formatMarkdownTable("x", {row("a", 64, 10, "none"), row("a", 64, 9, "linear")});
  CHECK(two.find("| a (none) | 10.00 |") != std::string::npos);
  CHECK(two.find("| a (linear a=1) | 9.00 |") != std::string::npos);  // a fixed factor is named (row scale 1)
}

TEST_CASE("results table: a variant run over several seeds shows mean ± sample standard deviation") {
  auto row = [](std::string run, int64_t seed, int64_t Lvalid, double ppl) {
    EvalRow r;
    r.run = run, r.seed = seed, r.Lvalid = Lvalid, r.ppl = ppl;
    return r;
  };
  // seeds 1..3 at 64: 100, 102, 104 -> mean 102, sd 2; at 128: 90, 102, 104 -> ratios 0.9, 1, 1
  std::string t = formatMarkdownTable(
      "x", {row("a", 1, 64, 100), row("a", 2, 64, 102), row("a", 3, 64, 104), row("a", 1, 128, 90),
            row("a", 2, 128, 102), row("a", 3, 128, 104), row("b", 1, 64, 50), row("b", 1, 128, 60)});
  CHECK(t.find("mean ± sample standard deviation") != std::string::npos);
  // ratios: mean 2.9 / 3, sd = sqrt(((0.9 - 0.9667)^2 + 2 (0.0333)^2) / 2) = 0.0577
  CHECK(t.find("| a | 102.00 ± 2.00 | 98.67 ± 7.57 | 0.967 ± 0.058 |") != std::string::npos);
  CHECK(t.find("| b | 50.00 | 60.00 | 1.200 |") != std::string::npos);
}

TEST_CASE("scenario: seeds repeat a variant, each run with its seed as seed and init_seed") {
  std::string text = kMinimal;
  text.replace(text.find("batch = 4\n"), 10, "batch = 4\nseeds = [3, 1, 7]\n");
  Scenario s = parse(text);
  REQUIRE(s.variants.size() == 6);
  CHECK(s.variants[0].name == "alibi");
  CHECK(s.variants[0].train.seed == 3);
  CHECK(s.variants[0].model.initSeed == 3);
  CHECK(s.variants[2].label() == "alibi@seed7");
  CHECK(s.variants[3].name == "sin-long");
  CHECK(s.variants[3].train.steps == 30);
  CHECK(s.select({"sin-long"}).size() == 3);
  ScenarioVariant first = s.variants[0], second = s.variants[1];
  first.train.device = second.train.device = "cpu";
  CHECK(variantRunDir("runs", first) != variantRunDir("runs", second));  // each seed its own run
  // a variant's own list replaces [train]'s
  std::string own = kMinimal;
  own.replace(own.find("lr = 5e-4\n"), 10, "lr = 5e-4\nseeds = [5]\n");
  Scenario one = parse(own);
  REQUIRE(one.variants.size() == 2);
  CHECK_FALSE(one.variants[0].repeated);
  CHECK(one.variants[1].label() == "sin-long@seed5");
  std::string both = text;
  both.replace(both.find("steps = 30\n"), 11, "steps = 30\nseed = 2\n");
  CHECK_THAT(errorOf(both), Catch::Contains("seeds sets seed and init_seed"));
  std::string dup = kMinimal;
  dup.replace(dup.find("batch = 4\n"), 10, "batch = 4\nseeds = [1, 1]\n");
  CHECK_THAT(errorOf(dup), Catch::Contains("test.toml:7:9: seeds: duplicate seed"));
}

TEST_CASE("scenario: ntk_heads only beside an ntk interpolation") {
  std::string text = kMinimal;
  text.replace(text.find("interps = [\"none\", \"linear\"]"), 28,
               "interps = [\"ntk\"]\nntk_heads = \"leading-power-of-two\"\nvariants = [\"alibi\"]");
  CHECK(parse(text).evals[0].ntkHeads == NtkHeads::LeadingPowerOfTwo);
  std::string rotary = text;  // the rotary variant has no slopes
  rotary.replace(rotary.find("variants = [\"alibi\"]"), 20, "variants = [\"sin-long\"]");
  CHECK_THAT(errorOf(rotary), Catch::Contains("ntk_heads applies to ALiBi-family slopes, not rotary"));
  std::string wrong = kMinimal;
  wrong.replace(wrong.find("max_tokens"), 10, "ntk_heads = \"leading-power-of-two\"\nmax_tokens");
  CHECK_THAT(errorOf(wrong), Catch::Contains("ntk_heads applies to interps ntk and dynamic-ntk"));
  std::string bad = text;
  bad.replace(bad.find("leading-power-of-two"), 20, "keezen");
  CHECK_THAT(errorOf(bad), Catch::Contains("valid: all, leading-power-of-two"));
}

TEST_CASE("scenario: a variant that cannot be evaluated as asked fails while parsing") {
  std::string learned = kMinimal;
  learned.replace(learned.find("pos = \"rotary\""), 14, "pos = \"learned\"\nmax_positions = 128");
  CHECK_THAT(errorOf(learned), Catch::Contains("[eval] variant 'sin-long': lvalid 256 exceeds its learned position "
                                               "table of 128 rows (set max_positions)"));
  std::string t5 = kMinimal;
  t5.replace(t5.find("pos = \"rotary\""), 14, "pos = \"t5\"");
  CHECK_THAT(errorOf(t5), Catch::Contains("variant 'sin-long': interps linear applies to ALiBi-family and rotary"));
}

namespace {
// A Hugging Face BLOOM directory as far as parsing a scenario reads it: config.json, and a
// safetensors file whose header (all the weights digest reads) describes one tensor.
std::filesystem::path writeBloomDirectory(const std::filesystem::path& dir, int64_t hidden) {
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "config.json") << R"({"model_type": "bloom", "vocab_size": 64, "hidden_size": )" << hidden
                                     << R"(, "n_layer": 2, "n_head": 4, "seq_length": 32})";
  std::string header = R"({"word_embeddings.weight": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}})";
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i) bytes[size_t(i)] = char((header.size() >> (8 * i)) & 0xff);
  std::ofstream(dir / "model.safetensors", std::ios::binary) << bytes << header << std::string(4, '\0');
  return dir;
}
}  // namespace

TEST_CASE("a variant naming a pretrained model: its config, no [train], only its own keys, its run directory") {
  namespace fs = std::filesystem;
  fs::path base = fs::temp_directory_path() / "xtrap-test-scenario-pretrained";
  fs::remove_all(base);
  writeBloomDirectory(base / "bloom-tiny", 16);
  std::string text = R"([[variant]]
name = "bloom"
model = "bloom-tiny"
data = "wt"
dtype = "bfloat16"

[eval]
lvalid = "64..256"
interps = ["none", "ntk", "dynamic-ntk"]
)";
  Scenario s = parseScenario(text, "test.toml", base);
  REQUIRE(s.variants.size() == 1);
  const ScenarioVariant& v = s.variants[0];
  CHECK(v.pretrained());
  CHECK(v.pretrainedDir == (base / "bloom-tiny").string());
  CHECK(v.pretrainedType == "bloom");
  CHECK(v.weightsDigest.rfind("fnv1a64:", 0) == 0);
  CHECK((v.model.dModel == 16 && v.model.layers == 2 && v.model.heads == 4 && v.model.contextLength == 32));
  CHECK(v.train.dataDir == (base / "wt").string());
  CHECK(v.train.dtype == "bfloat16");
  // [train] gives it only where it runs and its data; its training keys are for trained variants
  Scenario mixed = parseScenario(std::string("[train]\nsteps = 7\nthreads = 3\ndata = \"other\"\n") + text +
                                     "[[variant]]\nname = \"small\"\npos = \"alibi\"\n",
                                 "test.toml", base);
  CHECK(mixed.variants[0].train.threads == 3);
  CHECK(mixed.variants[0].train.dataDir == (base / "wt").string());  // its own key wins
  CHECK(mixed.variants[1].train.steps == 7);
  ScenarioVariant resolved = v;
  resolved.train.device = "cpu";
  std::string dir = variantRunDir("runs", resolved).filename().string();
  CHECK(dir.rfind("pretrained-bloom-bloom-tiny-", 0) == 0);
  // other weights (here another width): another digest, another directory
  writeBloomDirectory(base / "bloom-tiny", 24);
  ScenarioVariant other = parseScenario(text, "test.toml", base).variants[0];
  other.train.device = "cpu";
  CHECK(other.weightsDigest != v.weightsDigest);
  CHECK(variantRunDir("runs", other) != variantRunDir("runs", resolved));

  auto errorIn = [&](const std::string& t) {
    try {
      parseScenario(t, "test.toml", base);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  std::string withSteps = text;
  withSteps.insert(withSteps.find("dtype"), "steps = 5\n");
  CHECK_THAT(errorIn(withSteps), Catch::StartsWith("test.toml:5:1: 'steps' does not apply to variant 'bloom'"));
  std::string missing = text;
  missing.replace(missing.find("\"bloom-tiny\""), 12, "\"no-such\"");
  CHECK(errorIn(missing) == "test.toml:3:9: model: no model directory " + (base / "no-such").string());
  CHECK_THAT(errorIn(text + "[[variant]]\nname = \"trained\"\npos = \"alibi\"\n"),
             Catch::Contains("variant 'trained' trains a model") && Catch::Contains("missing [train]"));
  fs::remove_all(base);
}

TEST_CASE("scenario: an init variant may adapt a pretrained variant, named by its weights digest") {
  namespace fs = std::filesystem;
  fs::path base = fs::temp_directory_path() / "xtrap-test-scenario-pretrained-init";
  fs::remove_all(base);
  writeBloomDirectory(base / "bloom-tiny", 16);
  std::string text = R"([[variant]]
name = "bloom"
model = "bloom-tiny"

[[variant]]
name = "bloom-128"
init = "bloom"
L = 128
interp = "linear"
data = "wt"
steps = 20

[eval]
lvalid = [128]
)";
  Scenario s = parseScenario(text, "test.toml", base);  // no [train]: the model is the source's
  REQUIRE(s.variants.size() == 2);
  const ScenarioVariant& v = s.variants[1];
  CHECK(v.adapted());
  CHECK((v.model.contextLength == 128 && v.model.dModel == 16 && v.model.vocabSize == 64));
  CHECK((v.model.alibiInterp == "linear" && v.model.alibiInterpFactor == 4.0));  // a = 128 / seq_length 32
  CHECK(v.train.initStep == 0);
  CHECK(v.train.dataDir == (base / "wt").string());  // a pretrained source reads any data
  for (auto& variant : s.variants) variant.train.device = "cpu";
  linkInitSources(s);
  CHECK(s.variants[1].train.initSource == s.variants[0].weightsDigest);
  fs::remove_all(base);
}

TEST_CASE("scenario: extend keys, checked against every variant of the block") {
  std::string text = kMinimal;
  text.replace(text.find("interps = [\"none\", \"linear\"]"), 28,
               "extend = [\"none\", \"self-extend+logn\"]\nextend_group = 4\nextend_window = 16");
  auto s = parse(text);
  CHECK(s.evals[0].extensions == std::vector<std::string>{"none", "self-extend+logn"});
  CHECK(s.evals[0].extensionSettings.group == 4);
  CHECK(s.evals[0].extensionSettings.window == 16);
  std::string unused = text;  // extend_leak with no leaky-rerope
  unused.replace(unused.find("extend_group = 4"), 16, "extend_leak = 4.0");
  CHECK_THAT(errorOf(unused), Catch::Contains("--extend-leak applies to --extend leaky-rerope only"));
  std::string bad = text;
  bad.replace(bad.find("self-extend+logn"), 16, "streaming");
  CHECK_THAT(errorOf(bad), Catch::Contains("unknown --extend 'streaming'"));
  std::string withInterp = kMinimal;  // sinks keep every distance within L: nothing to interpolate
  withInterp.replace(withInterp.find("max_tokens"), 10, "extend = [\"sinks\"]\nmax_tokens");
  CHECK_THAT(errorOf(withInterp), Catch::Contains("--interp linear with --extend sinks S=4 W=60"));
  std::string sinusoidal = text;  // absolute positions: grouped positions are not relative distances
  sinusoidal.replace(sinusoidal.find("pos = \"rotary\""), 14, "pos = \"sinusoidal\"");
  CHECK_THAT(errorOf(sinusoidal), Catch::Contains("variant 'sin-long': --extend self-extend G=4 W=16 + logn: not "
                                                  "defined for position method sinusoidal"));
}

TEST_CASE("scenario: an init variant adapts an earlier variant's model, its identity names the source's") {
  const std::string head = R"([train]
arch = "decoder"
L = 64
layers = 1
d_model = 32
heads = 4
ffn = 64
steps = 10
batch = 4
lr = 1e-3
device = "cpu"

[[variant]]
name = "rotary"
pos = "rotary"

[[variant]]
name = "alibi"
pos = "alibi"
)";
  const std::string eval = "\n[eval]\nlvalid = \"64\"\n";
  Scenario s = parse(head + R"(
[[variant]]
name = "rotary-pi"
init = "rotary"
L = 256
interp = "linear"
recipe = "pi"
steps = 3

[[variant]]
name = "alibi-ntk"
init = "alibi"
L = 128
interp = "ntk"
scale = 3
lr = 1e-4
adam_betas = [0.8, 0.9]
)" + eval);
  REQUIRE(s.variants.size() == 4);
  const ScenarioVariant &pi = s.variants[2], &ntk = s.variants[3];
  // PI: rope_scaling linear at a = 256 / 64; the paper's lr, warmup, constant schedule, betas, no decay.
  CHECK(pi.initVariant == "rotary");
  CHECK(pi.model.contextLength == 256);
  CHECK(pi.model.pos == "rotary");
  CHECK(pi.model.dModel == 32);
  CHECK(pi.model.ropeScaling.type == "linear");
  CHECK(pi.model.ropeScaling.factor == 4.0);
  CHECK(pi.train.steps == 3);
  CHECK(pi.train.lr == 2e-5);
  CHECK(pi.train.warmupSteps == 20);
  CHECK(pi.train.schedule == "constant");
  CHECK(pi.train.weightDecay == 0.0);
  CHECK(pi.train.beta1 == 0.9);
  CHECK(pi.train.beta2 == 0.95);
  CHECK(pi.train.initStep == 10);  // the source's last step
  CHECK(pi.train.initInterp == "linear");
  CHECK(pi.train.initScale == 4.0);
  // ALiBi with its own factor; lr and betas as given, no recipe.
  CHECK(ntk.model.alibiInterp == "ntk");
  CHECK(ntk.model.alibiInterpFactor == 3.0);
  CHECK(ntk.train.lr == 1e-4);
  CHECK(ntk.train.beta1 == 0.8);
  CHECK(ntk.train.beta2 == 0.9);
  CHECK(ntk.train.schedule == "cosine");

  // The identity: the source's identity and step, not where it lies; known before it is trained.
  CHECK_THROWS_AS(variantRunDir("r", pi), std::logic_error);
  linkInitSources(s);
  const ScenarioVariant& source = s.variants[0];
  CHECK(s.variants[2].train.initSource == runIdentityHash(source.model, source.train));
  ScenarioVariant moved = s.variants[2];
  moved.train.initRun = "elsewhere/decoder-rotary";
  moved.train.initDigest = "0123456789abcdef";
  CHECK(variantRunDir("r", moved) == variantRunDir("r", s.variants[2]));
  nlohmann::json id = runIdentity(s.variants[2].model, s.variants[2].train);
  CHECK(id["train"]["init"]["source"] == s.variants[2].train.initSource);
  CHECK(id["train"]["init"]["step"] == 10);
  CHECK_FALSE(id["train"]["init"].contains("run"));
  CHECK_FALSE(id["train"]["init"].contains("checkpoint_digest"));
  Scenario longer = parse(std::string(head).replace(head.find("steps = 10"), 10, "steps = 20") +
                          "\n[[variant]]\nname = \"pi\"\ninit = \"rotary\"\nL = 256\ninterp = \"linear\"\n" + eval);
  linkInitSources(longer);
  CHECK(variantRunDir("r", longer.variants[2]) != variantRunDir("r", s.variants[2]));

  auto fails = [&](const std::string& variant, const std::string& why) {
    INFO(variant);
    CHECK_THAT(errorOf(head + variant + eval), Catch::Contains(why));
  };
  fails("[[variant]]\nname = \"x\"\ninit = \"rotary\"\nL = 128\nd_model = 64\n", "'d_model' does not apply");
  fails("[[variant]]\nname = \"x\"\ninit = \"rotary\"\n", "init needs L");
  fails("[[variant]]\nname = \"x\"\ninit = \"nope\"\nL = 128\n", "no variant named 'nope' before");
  fails("[[variant]]\nname = \"x\"\ninit = \"rotary\"\nL = 128\nscale = 2\n", "applies with an interp");
  fails("[[variant]]\nname = \"x\"\ninit = \"rotary\"\nL = 128\ninterp = \"dynamic-ntk\"\n", "dynamic");
  fails("[[variant]]\nname = \"x\"\ninit = \"alibi\"\nL = 128\ninterp = \"yarn\"\n", "yarn applies to rotary");
  fails("[[variant]]\nname = \"x\"\ninit = \"rotary\"\nL = 128\nrecipe = \"longlora\"\n", "unknown recipe");
  fails("[[variant]]\nname = \"x\"\ninit = \"rotary\"\nL = 128\nseeds = [1, 2]\n", "seeds do not apply");
  fails("[[variant]]\nname = \"x\"\ninit = \"rotary\"\nL = 128\ndata = \"elsewhere\"\n", "its data must be");
  fails("[[variant]]\nname = \"x\"\npos = \"rotary\"\ninterp = \"linear\"\n", "applies to a variant with init");
  fails("[[variant]]\nname = \"x\"\npos = \"rotary\"\nadam_betas = [0.9]\n", "expected [beta1, beta2]");
}

TEST_CASE("scenario: scale fixes an interpolation's factor, only beside linear, ntk or yarn") {
  const std::string head =
      "[train]\nL = 64\n[[variant]]\nname = \"rotary\"\npos = \"rotary\"\n[eval]\nlvalid = \"64..512\"\n";
  CHECK(parse(head + "interps = [\"linear\"]\nscale = 4\n").evals[0].scale == 4.0);
  CHECK(parse(head + "interps = [\"linear\"]\n").evals[0].scale == 0.0);  // longest Lvalid / L_train
  CHECK_THAT(errorOf(head + "scale = 4\n"), Catch::Contains("scale applies to interps linear, ntk and yarn"));
  CHECK_THAT(errorOf(head + "interps = [\"linear\"]\nscale = 0.5\n"), Catch::Contains("must be >= 1"));
  CHECK_THAT(errorOf(head + "interps = [\"linear\"]\nscale = 2\nscale_per_length = true\n"),
             Catch::Contains("exclude each other"));
}
