#pragma once
// A run directory: run.json (configs, version, status), checkpoint.pt, train.jsonl, eval outputs.
// eval and probe read run.json, so they need no repeated flags.
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "model/model_config.h"
#include "run/train_config.h"

namespace xtrap {

struct RunInfo {
  std::filesystem::path dir;
  ModelConfig model;
  TrainConfig train;
  std::string status;  // "training" | "finished"
  int64_t stepsDone = 0;
  std::string dataDigest;  // corpusDigest() of the training data; empty for runs from before it
  nlohmann::json extra;    // final losses, throughput
  // A Hugging Face model directory read as a run (run/pretrained_config.h): its model_type (bloom,
  // mpt), empty for xtrap's runs. Its weights are read from the directory, never copied.
  std::string pretrained;
  // A run trained from a pretrained directory (train --init DIR): the family it was read as. Such a
  // run reads its data through the tokenizer.json copied into its own directory, as that model
  // does, not through WikiText's words; empty for a run of WikiText's words.
  std::string tokenizerFamily;
  // Pretrained models and runs trained from them: the id the first scored token is predicted from,
  // and eos_token_id, where generation stops.
  int32_t contextToken = -1;
  std::vector<int32_t> stopTokens;

  // Whether the run's text is tokenized by dir/tokenizer.json (a pretrained model, or a run
  // trained from one), not split into WikiText's words.
  bool readsTokenizer() const { return !pretrained.empty() || !tokenizerFamily.empty(); }
};

std::string xtrapVersion();  // "0.1.0 (git abc1234)"

// `--train-length`: a pretrained model's training length L_train where its config.json does not
// record it (mosaic-bert-base: 128, its config says 512); 0 keeps the config's. It sets the
// interpolation factor a = Lvalid / L_train and the rows' L_train. Throws std::invalid_argument
// for an xtrap run (its L is in run.json) or a length below 1.
void setTrainLength(RunInfo& run, int64_t length);

void writeRunInfo(const RunInfo& run);  // atomically
// run.json, or config.json of a Hugging Face model directory; throws a one-line error naming the file.
RunInfo readRunInfo(const std::filesystem::path& dir);

// Throws "run directory DIR already holds a run" when DIR has a run.json: a fresh train never
// overwrites one.
void requireNoRunIn(const std::filesystem::path& dir);

// Creates DIR (and its parents) for a fresh run; throws a one-line error with the reason
// (a path component is a file, permission denied).
void makeRunDirectory(const std::filesystem::path& dir);

// runs/<arch>-<pos>-L<L>-<yyyymmdd-HHMMSS>, not yet existing.
std::filesystem::path freshRunDir(const std::filesystem::path& root, const ModelConfig& m);
// The most recently modified directory under root holding a run.json; throws if none.
std::filesystem::path latestRunDir(const std::filesystem::path& root);

inline std::filesystem::path checkpointPath(const std::filesystem::path& dir) { return dir / "checkpoint.pt"; }

}  // namespace xtrap
