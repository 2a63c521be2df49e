#pragma once
// Training loop: AdamW (weight decay on matrices only), warmup + cosine / inverse-sqrt, gradient
// clipping, a progress bar, train.jsonl every logEvery steps, validation loss at L every
// evalEvery steps, atomic checkpoints every checkpointEvery steps and at the end.
#include <filesystem>

#include "train/run_directory.h"

namespace xtrap {

struct TrainRequest {
  ModelConfig model;
  TrainConfig train;
  std::filesystem::path runDir;
  bool resume = false;   // continue runDir from its checkpoint with its run.json configs
  bool progress = true;  // draw the progress bar
};

// Returns the finished run's info (run.json as written at the end).
RunInfo trainRun(TrainRequest request);

}  // namespace xtrap
