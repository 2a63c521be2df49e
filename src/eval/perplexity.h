#pragma once
// Scoring a token stream with a trained decoder: the windows come from decoderWindows(), windows
// of equal length are batched, attention runs on the block path for long windows (O(T) memory),
// and the vocabulary projection is done a chunk of rows at a time (a 12k-token window would
// otherwise need a 12k x V logits matrix).
#include <cstdint>
#include <functional>
#include <vector>

#include "data/token_span.h"
#include "dist/dist_group.h"
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
  int64_t stride = 0;           // 0 = Lvalid (non-overlapping)
  int64_t batch = 8;            // windows per forward
  int64_t queryBlock = 256;     // attention query block for windows longer than this; 0 = full matrix
  int64_t positionBuckets = 0;  // > 0: also accumulate NLL by position inside the window
  WindowShard shard;            // which windows this rank scores
  // Not empty: also accumulate NLL by document, document d being the stream's tokens from
  // documentStarts[d] (ascending, the first 0; data/text_documents.h).
  std::vector<int64_t> documentStarts;
  // Called before the windows of each length are scored, with that length (dynamic
  // interpolation sets the model's slopes for it).
  std::function<void(int64_t)> prepareLength;
};

struct ScoreOptions : WindowScoring {
  int32_t eos = -1;  // the <eos> id: the context the stream's first token is predicted from
};

struct ScoreTotals {
  ScoreTotals() = default;
  ScoreTotals(int64_t positionBuckets, const std::vector<int64_t>& documentStarts);
  // Adds per-token NLLs (N) scored at window positions `positions` (N) of windows of Lvalid, the
  // tokens being those at `streamIndex` (N) of the stream.
  void add(const torch::Tensor& nll, const std::vector<int64_t>& positions, int64_t Lvalid,
           const std::vector<int64_t>& streamIndex);

  double nll = 0;                 // summed over scored tokens
  int64_t tokens = 0;             // tokens scored
  std::vector<double> bucketNll;  // per position bucket (positionBuckets > 0)
  std::vector<int64_t> bucketTokens;
  std::vector<int64_t> documentStarts;  // as WindowScoring's
  std::vector<double> documentNll;      // per document (documentStarts not empty)
  std::vector<int64_t> documentTokens;
  double meanNll() const { return tokens ? nll / double(tokens) : 0.0; }
  void sumOverRanks(DistGroup& group);  // every rank gets the job's totals
};

// Scores all N tokens of `stream` (windows.h). `onProgress(tokensScoredSoFar)` is called after
// every batch. The model is put in eval mode.
ScoreTotals scoreDecoder(Transformer& model, TokenSpan stream, const ScoreOptions& opt,
                         const std::function<void(int64_t)>& onProgress = {});

}  // namespace xtrap
