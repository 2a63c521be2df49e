#include "run/run_directory.h"

#include <fmt/format.h>

#include <ctime>
#include <stdexcept>

#include "run/pretrained_config.h"
#include "util/atomic_file.h"
#include "xtrap_git_commit.h"  // generated at every build: XTRAP_GIT_COMMIT

namespace xtrap {
namespace fs = std::filesystem;

std::string xtrapVersion() { return fmt::format("{} (git {})", XTRAP_VERSION, XTRAP_GIT_COMMIT); }

void writeRunInfo(const RunInfo& run) {
  nlohmann::json j = {{"xtrap_version", xtrapVersion()},
                      {"model", run.model},
                      {"train", run.train},
                      {"status", run.status},
                      {"steps_done", run.stepsDone},
                      {"data_digest", run.dataDigest},
                      {"extra", run.extra.is_null() ? nlohmann::json::object() : run.extra}};
  if (!run.tokenizerFamily.empty())
    j["tokenizer"] = {
        {"family", run.tokenizerFamily}, {"context_token", run.contextToken}, {"stop_tokens", run.stopTokens}};
  writeTextAtomically(run.dir / "run.json", j.dump(2) + "\n");
}

RunInfo readRunInfo(const fs::path& dir) {
  auto file = dir / "run.json";
  if (isPretrainedDirectory(dir)) {
    PretrainedConfig p = readPretrainedConfig(dir);
    RunInfo run;
    run.dir = dir;
    run.model = p.model;
    run.status = "pretrained";
    run.pretrained = p.modelType;
    run.contextToken = p.contextToken;
    run.stopTokens = p.stopTokens;
    run.train.seed = 0;
    return run;
  }
  if (!fs::exists(file)) {
    if (!fs::exists(dir)) throw std::runtime_error("not a run directory: " + dir.string() + " does not exist");
    if (!fs::is_directory(dir)) throw std::runtime_error("not a run directory: " + dir.string() + " is a file");
    throw std::runtime_error("not a run directory: " + dir.string() +
                             " has neither run.json (an xtrap run) nor config.json (a Hugging Face model)");
  }
  RunInfo run;
  run.dir = dir;
  try {
    auto j = nlohmann::json::parse(readTextFile(file));
    run.model = j.at("model").get<ModelConfig>();
    run.train = j.at("train").get<TrainConfig>();
    run.status = j.at("status").get<std::string>();
    run.stepsDone = j.at("steps_done").get<int64_t>();
    run.dataDigest = j.value("data_digest", "");
    run.extra = j.value("extra", nlohmann::json::object());
    if (j.contains("tokenizer")) {
      const auto& t = j.at("tokenizer");
      t.at("family").get_to(run.tokenizerFamily);
      t.at("context_token").get_to(run.contextToken);
      t.at("stop_tokens").get_to(run.stopTokens);
    }
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error("malformed " + file.string() + ": " + e.what());
  }
  return run;
}

void setTrainLength(RunInfo& run, int64_t length) {
  if (length == 0) return;
  if (length < 1) throw std::invalid_argument("--train-length must be >= 1");
  if (run.pretrained.empty())
    throw std::invalid_argument("--train-length applies to pretrained models; " + run.dir.string() +
                                " is an xtrap run, trained at L = " + std::to_string(run.model.contextLength));
  run.model.contextLength = length;
}

void requireNoRunIn(const fs::path& dir) {
  if (fs::exists(dir / "run.json"))
    throw std::invalid_argument("run directory " + dir.string() + " already holds a run (use --resume to continue it)");
}

void makeRunDirectory(const fs::path& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (!ec && fs::is_directory(dir)) return;
  if (auto blocker = fileOnPath(dir); !blocker.empty())
    throw std::runtime_error("cannot create run directory " + dir.string() + ": " + blocker.string() +
                             " is not a directory");
  throw std::runtime_error("cannot create run directory " + dir.string() + ": " +
                           (ec ? ec.message() : std::string("not a directory")));
}

fs::path freshRunDir(const fs::path& root, const ModelConfig& m) {
  std::time_t now = std::time(nullptr);
  char stamp[32];
  std::strftime(stamp, sizeof(stamp), "%Y%m%d-%H%M%S", std::localtime(&now));
  auto base = root / fmt::format("{}-{}-L{}-{}", m.arch, m.pos, m.contextLength, stamp);
  auto dir = base;
  for (int k = 2; fs::exists(dir); ++k) dir = fs::path(base.string() + "-" + std::to_string(k));
  return dir;
}

fs::path latestRunDir(const fs::path& root) {
  fs::path best;
  fs::file_time_type bestTime;
  if (fs::is_directory(root)) {
    for (const auto& entry : fs::directory_iterator(root)) {
      auto file = entry.path() / "run.json";
      if (!fs::exists(file)) continue;
      auto t = fs::last_write_time(file);
      if (best.empty() || t > bestTime) best = entry.path(), bestTime = t;
    }
  }
  if (best.empty()) throw std::runtime_error("no run found under " + root.string() + "/ (train one first)");
  return best;
}

}  // namespace xtrap
