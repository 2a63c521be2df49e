#pragma once
// Scoring a token stream with a trained decoder: the windows come from the protocol
// (eval/window_protocol.h; xtrap's own: decoderWindows()), windows of equal length are
// batched, attention runs on the block path for long windows (O(T) memory), and the
// vocabulary projection is done a chunk of rows at a time (a 12k-token window would
// otherwise need a 12k x V logits matrix).
#include <cstdint>
#include <functional>
#include <vector>

#include "data/token_span.h"
#include "dist/dist_group.h"
#include "eval/kl_divergence.h"
#include "eval/window_protocol.h"
#include "model/transformer.h"

namespace xtrap {

// Data-parallel scoring: rank `rank` of `world` scores the windows whose index k (in the full
// window list) has k % world == rank; summing the ranks' totals scores every token exactly once.
struct WindowShard {
  int rank = 0;
  int world = 1;
  bool owns(size_t window) const { return static_cast<int>(window % static_cast<size_t>(world)) == rank; }
};

// How windows are scored, decoder or encoder.
struct WindowScoring {
  int64_t Lvalid = 512;
  int64_t stride = 0;           // 0 = Lvalid (non-overlapping); decoders: sliding and strided
  int64_t batch = 8;            // windows per forward
  int64_t queryBlock = 256;     // attention query block for windows longer than this; 0 = full matrix
  int64_t positionBuckets = 0;  // > 0: also accumulate NLL by position inside the window
  WindowShard shard;            // which windows this rank scores
  // Not empty: also accumulate NLL by document, document d being the stream's tokens from
  // documentStarts[d] (ascending, the first 0; data/text_documents.h); the documents lm-eval's
  // protocol scores apart.
  std::vector<int64_t> documentStarts;
  // Called before the windows of each length are scored, with that length (dynamic
  // interpolation sets the model's slopes for it).
  std::function<void(int64_t)> prepareLength;
};

struct ScoreOptions : WindowScoring {
  int32_t eos = -1;  // the context token c (window_protocol.h): a word-level run's <eos>, a tokenizer's bos or eos
  WindowProtocol protocol = WindowProtocol::Xtrap;
  bool bos = false;  // strided: c before every window
  // Not null: every scored token is also compared with this model's prediction from the same
  // window (kl_divergence.h); one process only (the per-token values are not summed over ranks).
  Transformer klBase{nullptr};
};

struct ScoreTotals {
  ScoreTotals() = default;
  ScoreTotals(int64_t positionBuckets, const std::vector<int64_t>& documentStarts);
  // Adds per-token NLLs (N) scored at window positions `positions` (N) of windows of Lvalid, the
  // tokens being those at `streamIndex` (N) of the stream, and their comparison with a base model.
  void add(const torch::Tensor& nll, const std::vector<int64_t>& positions, int64_t Lvalid,
           const std::vector<int64_t>& streamIndex, const KlRows* kl = nullptr);

  double nll = 0;                 // summed over scored tokens
  int64_t tokens = 0;             // tokens scored
  std::vector<double> bucketNll;  // per position bucket (positionBuckets > 0)
  std::vector<int64_t> bucketTokens;
  std::vector<int64_t> documentStarts;  // as WindowScoring's
  std::vector<double> documentNll;      // per document (documentStarts not empty)
  std::vector<int64_t> documentTokens;
  // Against a base model (ScoreOptions::klBase): KL(base || model) of every scored token in order,
  // the tokens whose most likely next token is the same under both, the base's and the model's
  // summed NLL from the same full log-softmax (kl_divergence.h); and KL and same-top counts by
  // position bucket and by document.
  std::vector<double> kl;
  int64_t sameTop = 0;
  double baseNll = 0, comparedNll = 0;
  std::vector<double> bucketKl, documentKl;
  std::vector<int64_t> bucketSameTop, documentSameTop;
  bool compared() const { return !kl.empty(); }
  double meanNll() const { return tokens ? nll / double(tokens) : 0.0; }
  // Every rank gets the job's totals; compared totals are one process's (a logic_error otherwise).
  void sumOverRanks(DistGroup& group);
};

// Scores all N tokens of `stream` (windows.h). `onProgress(tokensScoredSoFar)` is called after
// every batch. The model is put in eval mode.
ScoreTotals scoreDecoder(Transformer& model, TokenSpan stream, const ScoreOptions& opt,
                         const std::function<void(int64_t)>& onProgress = {});

}  // namespace xtrap
