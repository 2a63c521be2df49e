#pragma once
// How a run is trained; saved in run.json next to the ModelConfig.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace xtrap {

struct TrainConfig {
  std::string dataDir;         // WikiText-format directory
  int64_t steps = 250;         // optimizer steps (ignored when tokens > 0)
  int64_t tokens = 0;          // train on this many tokens instead of a step count
  int64_t batchSequences = 0;  // sequences per step; 0 = derived from batchTokens
  int64_t batchTokens = 4096;  // tokens per step when batchSequences = 0
  // Micro-batches per step: each rank's sequences of a step go through forward and backward in
  // this many equal parts, their gradients summed, so a step of B sequences needs the activation
  // memory of B / accumulate. The same step to float rounding.
  int64_t accumulate = 1;
  double lr = 2e-3;         // peak learning rate
  double minLrRatio = 0.1;  // cosine decays to lr * minLrRatio
  int64_t warmupSteps = 25;
  std::string schedule = "cosine";  // cosine | inverse-sqrt | constant
  double weightDecay = 0.01;
  double beta1 = 0.9, beta2 = 0.98;
  double clipNorm = 1.0;              // global gradient-norm clip; 0 = off
  uint64_t seed = 1;                  // data order, dropout and masking
  int64_t threads = 0;                // 0 = all cores
  std::string batchOrder = "random";  // random | contiguous L-token blocks of the train stream
  int64_t logEvery = 10;
  int64_t evalEvery = 100;     // validation loss at L every this many steps; 0 = only at the end
  int64_t evalTokens = 65536;  // validation tokens used by in-training evaluation
  int64_t checkpointEvery = 100;
  double maskProb = 0.15;   // encoders: fraction of tokens selected for masked LM
  int64_t maxBadSteps = 5;  // stop once this many steps had a non-finite loss/gradient; 0 = never
  // Where and in what precision (util/device_names.h). run.json records the device trained on
  // ("cpu" / "cuda", auto resolved); runs written before these keys existed read as cpu, float32.
  std::string device = "auto";
  std::string dtype = "float32";
  // Retrieval prompts mixed into the training stream (data/task_mix.h): the canonical spec
  // ("" = none) and the passkey prompts' filler (repeat | natural text of the train split).
  std::string taskMix;
  std::string taskFiller = "repeat";
  // What a task sequence's loss scores: all (a decoder's every next token, as any text; an
  // encoder's usual masked words plus the answer) | answer (its answer tokens only).
  std::string taskLoss = "all";
  // train --init (run/adapt_config.h, docs/adapt.md): the run this one started from, as given
  // (initRun, empty = trained from scratch), its identity (run/config_identity.h) and the step it
  // had reached, its checkpoint's digest, and the interpolation baked into the model (its effect
  // is in the ModelConfig; these say where it came from).
  std::string initRun;
  std::string initSource;
  int64_t initStep = 0;
  std::string initDigest;
  std::string initInterp = "none";
  double initScale = 1.0;

  bool adapted() const { return !initSource.empty(); }

  int64_t sequencesPerStep(int64_t contextLength) const;
  int64_t totalSteps(int64_t contextLength) const;
  void validate() const;  // throws std::invalid_argument with a one-line reason
  // The names --schedule and --batch-order accept (validate() checks them; --help lists them).
  static const std::vector<std::string>& scheduleNames();
  static const std::vector<std::string>& batchOrderNames();
};

void to_json(nlohmann::json& j, const TrainConfig& c);
void from_json(const nlohmann::json& j, TrainConfig& c);

}  // namespace xtrap
