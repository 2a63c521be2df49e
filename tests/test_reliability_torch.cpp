// Checkpoint integrity and the non-finite-step guard, through the library.
#include <torch/torch.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "error_of.h"
#include "eval/evaluate_run.h"
#include "run/checkpoint.h"
#include "run/checkpoint_file.h"
#include "train/trainer.h"
#include "util/atomic_file.h"
#include "util/out_of_memory.h"

using namespace xtrap;
using test::errorOf;
namespace fs = std::filesystem;

namespace {

// A WikiText-format directory of `lines` lines over a 40-word vocabulary (deterministic).
fs::path tinyCorpus(const std::string& name, int lines = 300) {
  auto dir = fs::temp_directory_path() / ("xtrap-relt-" + name + "-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  for (const char* split : {"train", "valid", "test"}) {
    std::ofstream out(dir / (std::string("wiki.") + split + ".tokens"));
    uint64_t x = 12345;
    for (int l = 0; l < lines; ++l) {
      for (int w = 0; w < 12; ++w) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        out << " w" << (x >> 59) + (x >> 61);
      }
      out << "\n";
    }
  }
  return dir;
}

TrainRequest tinyRequest(const fs::path& data, const fs::path& runDir) {
  TrainRequest req;
  req.model.layers = 1;
  req.model.dModel = 16;
  req.model.heads = 2;
  req.model.ffn = 32;
  req.model.contextLength = 16;
  req.train.dataDir = data.string();
  req.train.steps = 10;
  req.train.batchSequences = 2;
  req.train.threads = 1;
  req.train.device = "cpu";
  req.train.evalEvery = 0;
  req.train.evalTokens = 64;
  req.train.checkpointEvery = 2;
  req.train.logEvery = 1;
  req.runDir = runDir;
  req.progress = false;
  return req;
}

std::vector<nlohmann::json> logLines(const fs::path& run) {
  std::vector<nlohmann::json> lines;
  std::ifstream in(run / "train.jsonl");
  for (std::string line; std::getline(in, line);) lines.push_back(nlohmann::json::parse(line));
  return lines;
}

}  // namespace

TEST_CASE("checkpoint round-trips state and rejects truncated or flipped files", "[reliability]") {
  auto dir = tinyCorpus("ckpt");
  auto req = tinyRequest(dir, dir / "run");
  req.model.vocabSize = 50;
  Transformer model(req.model);
  TrainingState state;
  state.step = 7;
  state.tokensSeen = 700;
  state.badSteps = 1;
  state.samplerState = "sampler bytes";
  state.torchRngState = torch::randint(0, 255, {16}, torch::kUInt8);
  auto file = dir / "checkpoint.pt";
  saveCheckpoint(file, model, nullptr, state);

  ModelConfig other = req.model;
  other.initSeed = 99;
  Transformer loaded(other);
  TrainingState back = loadCheckpoint(file, loaded, nullptr);
  CHECK(back.step == 7);
  CHECK(back.tokensSeen == 700);
  CHECK(back.badSteps == 1);
  CHECK(back.samplerState == "sampler bytes");
  CHECK(torch::equal(back.torchRngState, state.torchRngState));
  for (const auto& p : model->named_parameters()) CHECK(torch::equal(p.value(), loaded->named_parameters()[p.key()]));

  std::string bytes = readTextFile(file);
  writeTextAtomically(file, bytes.substr(0, bytes.size() / 2));
  CHECK(errorOf([&] { loadCheckpoint(file, loaded, nullptr); }).rfind("truncated checkpoint " + file.string(), 0) == 0);
  bytes[bytes.size() / 2] ^= 0x40;
  writeTextAtomically(file, bytes);
  CHECK(errorOf([&] { loadCheckpoint(file, loaded, nullptr); }) ==
        "corrupt checkpoint " + file.string() + ": checksum mismatch");
  CHECK(errorOf([&] { loadCheckpoint(dir / "none.pt", loaded, nullptr); }) ==
        "checkpoint not found: " + (dir / "none.pt").string());
  fs::remove_all(dir);
}

TEST_CASE("non-finite steps are skipped and counted, and --max-bad-steps stops the run", "[reliability]") {
  auto dir = tinyCorpus("nan");
  SECTION("below the limit the run finishes and reports the count") {
    auto req = tinyRequest(dir, dir / "ok");
    req.injectNanAtSteps = {3};
    RunInfo run = trainRun(req);
    CHECK(run.status == "finished");
    CHECK(run.extra["bad_steps"] == 1);
    auto lines = logLines(run.dir);
    CHECK(lines[2]["step"] == 3);
    CHECK(lines[2]["bad_steps"] == 1);
    CHECK(lines[2]["loss"].is_null());  // nlohmann::json writes NaN as null
    Transformer model = loadTrainedModel(run);
    for (const auto& p : model->parameters()) CHECK(torch::isfinite(p).all().item<bool>());
  }
  SECTION("at the limit it stops and keeps the last good checkpoint") {
    auto req = tinyRequest(dir, dir / "stop");
    req.injectNanAtSteps = {5, 6};
    req.train.maxBadSteps = 2;
    CHECK(errorOf([&] { trainRun(req); }) ==
          "training stopped at step 6: 2 steps had a non-finite loss or gradient (--max-bad-steps 2); "
          "last good checkpoint " +
              checkpointPath(req.runDir).string() + " (step 4)");
    RunInfo run = readRunInfo(req.runDir);
    CHECK(run.status == "stopped");
    CHECK(run.stepsDone == 4);
    Transformer model(run.model);
    CHECK(loadCheckpoint(checkpointPath(run.dir), model, nullptr).step == 4);
    CHECK(logLines(run.dir).back()["bad_steps"] == 2);
  }
  fs::remove_all(dir);
}

TEST_CASE("a checkpoint is checked against the model run.json describes", "[reliability][issue27]") {
  auto dir = tinyCorpus("belongs");
  auto req = tinyRequest(dir, dir / "run");
  req.model.vocabSize = 50;
  fs::create_directories(dir / "run");
  auto file = checkpointPath(dir / "run");
  const std::string runJson = (dir / "run" / "run.json").string();
  Transformer model(req.model);
  saveCheckpoint(file, model, nullptr, TrainingState{});

  SECTION("its stored configuration names the differing setting") {
    ModelConfig rotary = req.model;
    rotary.pos = "rotary";
    Transformer other(rotary);
    CHECK(errorOf([&] { loadCheckpoint(file, other, nullptr); }) ==
          "checkpoint " + file.string() + " does not belong to " + runJson +
              ": pos is \"alibi\" in the checkpoint, \"rotary\" in run.json");
  }
  SECTION("a checkpoint without a stored configuration still loads, with every shape checked") {
    // The payload as xtrap wrote it before the configuration was stored: model and counters only.
    auto writeOldFormat = [&](Transformer& m) {
      torch::serialize::OutputArchive archive, modelArchive;
      m->save(modelArchive);
      archive.write("model", modelArchive);
      archive.write("step", torch::tensor(int64_t(3)));
      archive.write("tokens_seen", torch::tensor(int64_t(0)));
      archive.write("bad_steps", torch::tensor(int64_t(0)));
      archive.write("sampler_state", torch::empty({0}, torch::kUInt8));
      std::ostringstream payload;
      archive.save_to(payload);
      writeTextAtomically(file, frameCheckpoint(payload.str()));
    };
    writeOldFormat(model);
    Transformer same(req.model);
    CHECK(loadCheckpoint(file, same, nullptr).step == 3);
    ModelConfig wider = req.model;
    wider.vocabSize = 60;  // every other tensor keeps its shape
    Transformer other(wider);
    std::string error = errorOf([&] { loadCheckpoint(file, other, nullptr); });
    INFO(error);
    CHECK(error.rfind("checkpoint " + file.string() + " does not belong to " + runJson + ": ", 0) == 0);
    CHECK(error.find(" is [50, 16] in the checkpoint, [60, 16] for run.json's model") != std::string::npos);
  }
  fs::remove_all(dir);
}

TEST_CASE("an allocator's out-of-memory error becomes one line naming the remedy", "[reliability]") {
  auto advised = [](const std::function<void()>& fail) {
    return errorOf([&] {
      withOutOfMemoryAdvice("scoring Lvalid 16384 on cuda,", "lower --batch (e.g. --batch 4)", [&] {
        fail();
        return 0;
      });
    });
  };
  // The messages of LibTorch's allocators: CUDA's caching allocator (2.x wording), and the CPU
  // allocator's as Debian's LibTorch 1.13 printed it for a failed 217 MiB tensor under ulimit -v.
  // Thrown as LibTorch throws them (C10_THROW_ERROR: the constructor taking a source location,
  // which 1.13 and 2.x share; 1.13's taking a backtrace string is gone in 2.x).
  CHECK(advised([] {
          C10_THROW_ERROR(OutOfMemoryError,
                          "CUDA out of memory. Tried to allocate 4.00 GiB. GPU 0 has a total capacity of 79.19 GiB "
                          "of which 1.20 GiB is free.");
        }) == "out of memory scoring Lvalid 16384 on cuda, tried to allocate 4.00 GiB: lower --batch (e.g. --batch 4)");
  CHECK(advised([] {
          C10_THROW_ERROR(
              Error,
              "[enforce fail at alloc_cpu.cpp:75] err == 0. DefaultCPUAllocator: can't allocate memory: you "
              "tried to allocate 228065280 bytes. Error code 12 (Cannot allocate memory)");
        }) ==
        "out of memory scoring Lvalid 16384 on cuda, tried to allocate 228065280 bytes: lower --batch (e.g. "
        "--batch 4)");
#if !defined(__SANITIZE_ADDRESS__)
  // A real failure of this LibTorch's CPU allocator (2^62 bytes exceed any address space; ASan
  // would abort on the request instead of failing it).
  CHECK(advised([] { torch::empty({int64_t(1) << 62}, torch::kUInt8); }) ==
        "out of memory scoring Lvalid 16384 on cuda, tried to allocate 4611686018427387904 bytes: lower --batch (e.g. "
        "--batch 4)");
#endif
  // Any other error passes unchanged.
  CHECK(advised([] { throw std::runtime_error("disk full"); }) == "disk full");
  CHECK(advised([] { C10_THROW_ERROR(Error, "shapes differ"); }).rfind("shapes differ", 0) == 0);
}

TEST_CASE("eval's out-of-memory advice names a knob that lowers the memory of the path in use", "[reliability]") {
  EvalRequest req;  // --query-block 256
  req.batch = 8;
  CHECK(outOfMemoryRemedy(req, false, AttentionPath::Block, BiasKind::Linear) == "lower --batch (e.g. --batch 4)");
  req.batch = 1;
  // The block path's memory is O(Lvalid x query block), in the compute precision.
  CHECK(outOfMemoryRemedy(req, false, AttentionPath::Block, BiasKind::Linear) ==
        "at --batch 1, lower --query-block (now 256) or use --dtype bfloat16");
  CHECK(outOfMemoryRemedy(req, true, AttentionPath::Block, BiasKind::Table) ==
        "at --batch 1, lower --query-block (now 256)");
  req.queryBlock = 0;  // the full Lvalid x Lvalid matrix
  CHECK(outOfMemoryRemedy(req, true, AttentionPath::Reference, BiasKind::Linear) ==
        "at --batch 1, set --query-block (e.g. 256)");
  // SDPA with a bias tensor holds Lvalid x Lvalid; without one, and the fused kernel, O(Lvalid).
  CHECK(outOfMemoryRemedy(req, true, AttentionPath::Sdpa, BiasKind::Table) ==
        "at --batch 1, set --query-block (e.g. 256)");
  CHECK(outOfMemoryRemedy(req, true, AttentionPath::Sdpa, BiasKind::None) ==
        "at --batch 1 the sdpa attention path already holds O(Lvalid) memory: evaluate a shorter --Lvalid");
  CHECK(outOfMemoryRemedy(req, true, AttentionPath::FusedLinearBias, BiasKind::Linear) ==
        "at --batch 1 the fused-linear-bias attention path already holds O(Lvalid) memory: evaluate a shorter "
        "--Lvalid");
}
