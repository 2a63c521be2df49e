#pragma once
// The run directory's side of training, kept by rank 0 alone (the other ranks only read the
// checkpoint): run.json, train.jsonl, checkpoint.pt with the data-order and generator states,
// and the stops that leave them consistent.
#include <torch/torch.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "data/block_sampler.h"
#include "model/transformer.h"
#include "run/checkpoint.h"
#include "run/run_directory.h"
#include "run/run_lock.h"

namespace xtrap {

class RunRecorder {
 public:
  RunRecorder(RunInfo& run, bool root, torch::Device device) : run_(run), root_(root), device_(device) {}

  // A fresh run: makes the directory. --resume: loads the checkpoint (if any) into the model,
  // optimizer, sampler and generators and keeps the log lines written before it. Then run.json
  // says "training".
  TrainingState begin(bool resume, Transformer& model, torch::optim::Optimizer& optimizer, BlockSampler& sampler);

  void log(const nlohmann::json& line);

  // Rank 0 writes it; every rank records the step (all decide alike whether one is due).
  void checkpoint(TrainingState& state, Transformer& model, torch::optim::Optimizer& optimizer,
                  const BlockSampler& sampler);
  bool checkpointed(int64_t step) const { return checkpointStep_ == step; }

  // run.json after a step, or at the end with the final numbers.
  void record(const std::string& status, int64_t stepsDone);

  // The parameters are still finite (bad updates were skipped), but whatever produces the
  // non-finite values will not go away by itself: stop, leaving the last checkpoint as it is.
  [[noreturn]] void stopForBadSteps(const TrainingState& state);

  // Called after the checkpoint of the current step is on disk.
  [[noreturn]] void stopForSignal(const TrainingState& state, int signal);

 private:
  std::filesystem::path logFile() const { return run_.dir / "train.jsonl"; }
  [[noreturn]] void failLog() const;

  RunInfo& run_;
  bool root_;
  torch::Device device_;
  int64_t checkpointStep_ = -1;  // step of the checkpoint on disk; -1 = none
  std::optional<RunLock> lock_;  // root: held until the run ends
  std::ofstream log_;
};

}  // namespace xtrap
