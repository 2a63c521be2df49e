// The training step without host reads (train/device_step.h), uncaptured on the CPU, against
// TrainStep: the same losses to float rounding (AdamW's scalars are float32 tensors there, double
// here), the same skip of a non-finite step, train.jsonl lines only every --log-every steps with
// the values of those steps, and a resumed run that continues exactly as an uninterrupted one.
// The captured step is checked on a GPU (tests/tools/gpu_checks.cpp).
#include <catch2/catch.hpp>
#include <cmath>
#include <fstream>

#include "error_of.h"
#include "run/checkpoint.h"
#include "test_support.h"

using namespace xtrap;

namespace {

ModelConfig droppedAlibi() {
  ModelConfig c = test::tinyConfig("alibi");
  c.dropout = 0.1;  // masks drawn in the same order by both steps
  return c;
}

test::RequestSetup withStep(const std::string& cudaGraph, std::set<int64_t> nanAt = {}) {
  return [=](TrainRequest& r) {
    r.cudaGraph = cudaGraph;
    r.injectNanAtSteps = nanAt;
  };
}

std::vector<nlohmann::json> logLines(const RunInfo& run) {
  std::vector<nlohmann::json> lines;
  std::ifstream in(run.dir / "train.jsonl");
  for (std::string line; std::getline(in, line);) lines.push_back(nlohmann::json::parse(line));
  return lines;
}

}  // namespace

TEST_CASE("the step without host reads trains as the host-read step does", "[device-step]") {
  RunInfo host = test::trainTiny("ds-host", droppedAlibi(), 12, 1, {}, withStep("off"));
  RunInfo device = test::trainTiny("ds-device", droppedAlibi(), 12, 1, {}, withStep("uncaptured"));
  CHECK(host.extra["train_step"] == "host");
  CHECK(device.extra["train_step"] == "uncaptured");
  auto a = test::loggedLosses(host), b = test::loggedLosses(device);
  REQUIRE(a.size() == 12);
  CHECK(test::worstRelative(a, b) <= 1e-5);
  CHECK(b.front() != b.back());  // it trains
  double va = host.extra["final_val_loss"], vb = device.extra["final_val_loss"];
  CHECK(std::abs(va - vb) <= 1e-5 * va);
  // auto on the CPU is the host-read step, bit for bit (committed CPU results stay as they are).
  RunInfo automatic = test::trainTiny("ds-auto", droppedAlibi(), 12, 1, {}, withStep("auto"));
  CHECK(automatic.extra["train_step"] == "host");
  CHECK(test::loggedLosses(automatic) == a);
}

TEST_CASE("without host reads, train.jsonl has a line every --log-every steps with that step's values",
          "[device-step]") {
  RunInfo every = test::trainTiny("ds-every", droppedAlibi(), 12, 1, {}, withStep("uncaptured"));
  RunInfo sparse = test::trainTiny(
      "ds-sparse", droppedAlibi(), 12, 1, [](TrainConfig& t) { t.logEvery = 5; }, withStep("uncaptured"));
  auto all = logLines(every), some = logLines(sparse);
  std::vector<int64_t> steps;
  for (const auto& line : some)
    if (line.contains("loss")) steps.push_back(line["step"]);
  CHECK((steps == std::vector<int64_t>{5, 10, 12}));  // and the last
  for (const auto& line : some)
    if (line.contains("loss")) {
      const auto& same = all[line["step"].get<size_t>() - 1];
      CHECK(line["loss"] == same["loss"]);  // the same computation on the CPU: equal
      CHECK(line["grad_norm"] == same["grad_norm"]);
    }
}

TEST_CASE("without host reads a non-finite step is skipped on the device and counted at the next read",
          "[device-step]") {
  SECTION("as the host-read step skips it") {
    RunInfo host = test::trainTiny("ds-nan-host", droppedAlibi(), 8, 1, {}, withStep("off", {3}));
    RunInfo device = test::trainTiny("ds-nan-device", droppedAlibi(), 8, 1, {}, withStep("uncaptured", {3}));
    auto a = logLines(host), b = logLines(device);
    CHECK(b[2]["step"] == 3);
    CHECK(b[2]["loss"].is_null());  // NaN
    CHECK(b[2]["bad_steps"] == 1);
    CHECK(device.extra["bad_steps"] == 1);
    for (size_t i = 3; i < 8; ++i) CHECK(std::abs(a[i]["loss"].get<double>() - b[i]["loss"].get<double>()) <= 1e-5);
    Transformer model(device.model);
    loadCheckpoint(checkpointPath(device.dir), model, nullptr);
    for (const auto& p : model->parameters()) CHECK(torch::isfinite(p).all().item<bool>());
  }
  SECTION("in the next line when the step itself has none") {
    RunInfo device = test::trainTiny(
        "ds-nan-later", droppedAlibi(), 8, 1, [](TrainConfig& t) { t.logEvery = 4; }, withStep("uncaptured", {3}));
    auto lines = logLines(device);
    CHECK(lines[0]["step"] == 4);
    CHECK(lines[0]["bad_steps"] == 1);
    CHECK(std::isfinite(lines[0]["loss"].get<double>()));
  }
  SECTION("--max-bad-steps stops the run at the read that sees them") {
    auto stop = [](TrainConfig& t) {
      t.maxBadSteps = 2;
      t.checkpointEvery = 2;
    };
    std::string error = test::errorOf([&] {
      test::trainTiny("ds-nan-stop", droppedAlibi(), 8, 1, stop, withStep("uncaptured", {5, 6}));
    });
    CHECK(error.rfind("training stopped at step 6: 2 steps had a non-finite loss or gradient (--max-bad-steps 2); "
                      "last good checkpoint ",
                      0) == 0);
    CHECK(error.find("(step 4)") != std::string::npos);
  }
  SECTION("a checkpoint step is a read: the step it would save is checked first") {
    auto stop = [](TrainConfig& t) {
      t.logEvery = 10;
      t.maxBadSteps = 1;
      t.checkpointEvery = 2;
    };
    std::string error = test::errorOf(
        [&] { test::trainTiny("ds-nan-checkpoint", droppedAlibi(), 8, 1, stop, withStep("uncaptured", {3})); });
    CHECK(error.rfind("training stopped at step 4: 1 steps had a non-finite loss or gradient", 0) == 0);
    CHECK(error.find("(step 2)") != std::string::npos);
  }
}

TEST_CASE("without host reads a resumed run continues exactly as the uninterrupted one", "[device-step]") {
  auto everyFive = [](TrainConfig& t) { t.checkpointEvery = 5; };
  RunInfo whole = test::trainTiny("ds-whole", droppedAlibi(), 10, 1, everyFive, withStep("uncaptured"));
  // The same run stopped after step 6 (a NaN there and --max-bad-steps 1): its checkpoint is step 5's.
  auto stopAtSix = [](TrainConfig& t) {
    t.checkpointEvery = 5;
    t.maxBadSteps = 1;
  };
  std::string error = test::errorOf(
      [&] { test::trainTiny("ds-parted", droppedAlibi(), 10, 1, stopAtSix, withStep("uncaptured", {6})); });
  REQUIRE(error.find("(step 5)") != std::string::npos);
  TrainRequest resume;
  resume.resume = true;
  resume.runDir = std::filesystem::temp_directory_path() / "xtrap-test-run-ds-parted";
  resume.progress = false;
  resume.cudaGraph = "uncaptured";
  RunInfo parted = trainRun(resume);
  CHECK(test::loggedLosses(parted) == test::loggedLosses(whole));
  CHECK(parted.extra["final_val_loss"] == whole.extra["final_val_loss"]);
  CHECK(parted.extra["bad_steps"] == 0);
}

TEST_CASE("the step without host reads, asked for where it cannot apply, is a one-line error", "[device-step]") {
  CHECK(test::errorOf([] {
          test::trainTiny("ds-encoder", test::tinyConfig("alibi", "encoder"), 2, 1, {}, withStep("uncaptured"));
        }) ==
        "--cuda-graph uncaptured: an encoder scores a different number of masked tokens every step (a dynamic "
        "shape)");
  ModelConfig adaptive = test::tinyConfig("alibi");
  adaptive.adaptiveSoftmaxCutoffs = {20};
  CHECK(test::errorOf([&] {
          test::trainTiny("ds-adaptive", adaptive, 2, 1, {}, withStep("uncaptured"));
        }).rfind("--cuda-graph uncaptured: the adaptive softmax", 0) == 0);
}
