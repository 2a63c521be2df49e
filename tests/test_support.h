#pragma once
// Small models and runs shared by the tensor tests.
#include <filesystem>
#include <functional>
#include <string>

#include "model/model_config.h"
#include "model/transformer.h"
#include "train/trainer.h"

namespace xtrap::test {

using ModelSetup = std::function<void(ModelConfig&)>;

inline ModelConfig tinyConfig(const std::string& pos, const std::string& arch = "decoder", int64_t heads = 4) {
  ModelConfig c;
  c.arch = arch;
  c.pos = pos;
  c.vocabSize = 50;
  c.layers = 2;
  c.dModel = 16;
  c.heads = heads;
  c.ffn = 32;
  c.dropout = 0.0;
  c.contextLength = 16;
  c.maxPositions = 64;
  c.alibiInit = "standard";
  return c;
}

inline double maxAbsDiff(const torch::Tensor& a, const torch::Tensor& b) {
  return (a.to(torch::kFloat64) - b.to(torch::kFloat64)).abs().max().item<double>();
}

// Trains a tiny model on the shipped WikiText-2 into a fresh directory and returns the run.
inline RunInfo trainTiny(const std::string& name, ModelConfig model, int64_t steps, int64_t threads = 1) {
  TrainRequest req;
  req.model = model;
  req.train.dataDir = XTRAP_DEFAULT_DATA_DIR;
  req.train.steps = steps;
  req.train.batchSequences = 8;
  req.train.lr = 3e-3;
  req.train.warmupSteps = 5;
  req.train.evalEvery = 0;
  req.train.evalTokens = 4096;
  req.train.threads = threads;
  req.train.logEvery = 1;
  req.progress = false;
  req.runDir = std::filesystem::temp_directory_path() / ("xtrap-test-run-" + name);
  std::filesystem::remove_all(req.runDir);
  return trainRun(req);
}

}  // namespace xtrap::test
