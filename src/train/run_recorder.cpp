#include "train/run_recorder.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>

#include "util/atomic_file.h"
#include "util/execution_context.h"
#include "util/interrupt.h"

namespace xtrap {
namespace fs = std::filesystem;

namespace {

torch::Tensor torchRngState() {
  auto gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  return gen.get_state();
}
void restoreTorchRng(const torch::Tensor& state) {
  auto gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  gen.set_state(state);
}

// Keeps the log lines written before the checkpoint of `step` (a resumed run redoes the rest):
// the step lines up to it, but not the end-of-run validation line, which has no "loss" and is
// written after the last step's line.
void truncateLog(const fs::path& file, int64_t step) {
  if (!fs::exists(file)) return;
  std::ifstream in(file);
  std::string line, kept;
  while (std::getline(in, line)) {
    try {
      auto j = nlohmann::json::parse(line);
      int64_t s = j.value("step", int64_t(0));
      if (s < step || (s == step && j.contains("loss"))) kept += line + "\n";
    } catch (const nlohmann::json::exception&) {
      // a torn last line from a killed run
    }
  }
  writeTextAtomically(file, kept);
}

}  // namespace

TrainingState RunRecorder::begin(bool resume, Transformer& model, torch::optim::Optimizer& optimizer,
                                 BlockSampler& sampler) {
  TrainingState state;
  if (root_) {
    // From here until the run ends no other process writes this directory (two trains with
    // the same --out, a --resume beside a running train, two scenario runs).
    if (!resume) makeRunDirectory(run_.dir);
    lock_.emplace(run_.dir);
    if (!resume) requireNoRunIn(run_.dir);  // again, now that no one else can start one
  }
  if (resume && root_) removeStaleTemporaries(run_.dir);
  if (resume && fs::exists(checkpointPath(run_.dir))) {
    state = loadCheckpoint(checkpointPath(run_.dir), model, &optimizer);
    sampler.restore(state.samplerState);
    if (root_ && state.torchRngState.defined()) restoreTorchRng(state.torchRngState);
    if (root_) restoreCudaGeneratorState(device_, state.cudaRngState);
    if (root_) truncateLog(logFile(), state.step);
    checkpointStep_ = state.step;
  } else if (root_) {
    if (fs::exists(logFile())) fs::remove(logFile());
  }
  if (root_) {
    log_.open(logFile(), std::ios::app);
    if (!log_) failLog();
  }
  run_.status = "training";
  run_.stepsDone = state.step;
  if (root_) writeRunInfo(run_);
  return state;
}

void RunRecorder::log(const nlohmann::json& line) {
  if (!root_) return;
  log_ << line.dump() << "\n" << std::flush;
  if (!log_) failLog();
}

void RunRecorder::checkpoint(TrainingState& state, Transformer& model, torch::optim::Optimizer& optimizer,
                             const BlockSampler& sampler) {
  if (root_) {
    state.samplerState = sampler.state();
    state.torchRngState = torchRngState();
    state.cudaRngState = cudaGeneratorState(device_);
    saveCheckpoint(checkpointPath(run_.dir), model, &optimizer, state);
  }
  checkpointStep_ = state.step;
}

void RunRecorder::record(const std::string& status, int64_t stepsDone) {
  run_.status = status;
  run_.stepsDone = stepsDone;
  if (root_) writeRunInfo(run_);
}

void RunRecorder::stopForBadSteps(const TrainingState& state) {
  record("stopped", std::max<int64_t>(checkpointStep_, 0));
  std::string kept = checkpointStep_ >= 0 ? fmt::format("last good checkpoint {} (step {})",
                                                        checkpointPath(run_.dir).string(), checkpointStep_)
                                          : std::string("no checkpoint was written");
  throw std::runtime_error(
      fmt::format("training stopped at step {}: {} steps had a non-finite loss or gradient (--max-bad-steps {}); {}",
                  state.step, state.badSteps, run_.train.maxBadSteps, kept));
}

void RunRecorder::stopForSignal(const TrainingState& state, int signal) {
  record("interrupted", state.step);
  if (!root_) throw Interrupted(signal, "");  // one line per job: rank 0's
  throw Interrupted(signal, fmt::format("interrupted by {} at step {}: checkpoint saved; continue with "
                                        "xtrap train --resume {}",
                                        signalName(signal), state.step, run_.dir.string()));
}

void RunRecorder::failLog() const {
  throw std::runtime_error("cannot write " + logFile().string() + ": " + std::strerror(errno));
}

}  // namespace xtrap
