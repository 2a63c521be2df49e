#pragma once
// Scoring retrieval prompts (data/retrieval_prompt.h) with a trained model, a batch of equal-length
// prompts a forward pass, on the same attention paths as perplexity (query blocks for long
// prompts; the fused kernel on a GPU).
//  decoder: teacher-forced. The answer tokens t_j (j in [answerBegin, T)) are predicted from the
//    features at j - 1 given the true earlier tokens; a trial is correct when the argmax over the
//    vocabulary is t_j at every j.
//  encoder: the answer tokens are replaced by <mask> (and <bos> prepended when the encoder uses
//    one); a trial is correct when the argmax at every masked position is its answer token.
// Both also sum log p(t_j): the answer's mean log-probability per token. A decoder's answer tokens
// can also be compared with a base model's predictions from the same prompt (eval/kl_divergence.h).
#include <functional>
#include <vector>

#include "data/mlm_masking.h"
#include "data/retrieval_prompt.h"
#include "eval/kl_divergence.h"
#include "eval/perplexity.h"

namespace xtrap {

struct RetrievalTotals {
  int64_t trials = 0, correct = 0;
  int64_t answerTokens = 0;
  double answerLogProb = 0;  // summed over answer tokens
  // Against RetrievalScoreOptions::klBase: every answer token's KL(base || model), the tokens whose
  // most likely token is the same under both, the base's and the model's summed NLL of the answers
  // from the same full log-softmax (kl_divergence.h).
  std::vector<double> kl;
  int64_t sameTop = 0;
  double baseNll = 0, comparedNll = 0;
  // Every rank gets the job's totals; compared totals are one process's (a logic_error otherwise).
  void sumOverRanks(DistGroup& group);
};

struct RetrievalScoreOptions {
  int64_t batch = 8;
  int64_t queryBlock = 256;
  WindowShard shard;            // which prompts (by index) this rank scores
  MlmTokens mlm;                // encoders: <mask> and <bos>
  Transformer klBase{nullptr};  // decoders: not null, compare every answer token with this model
};

// One prompt's answer as scored (eval --log-samples): at each answer token, the argmax over the
// vocabulary and the log-probability of the right token.
struct RetrievalTrial {
  std::vector<int64_t> predicted;
  std::vector<double> answerLogProb;
};

// Every prompt must have the same length (the model sees it, plus <bos> for such an encoder).
// `trials` (optional): filled for the prompts this rank scores, indexed like `prompts`.
RetrievalTotals scoreRetrieval(Transformer& model, const std::vector<RetrievalPrompt>& prompts,
                               const RetrievalScoreOptions& opt, std::vector<RetrievalTrial>* trials = nullptr);

// Every rank's trials on every rank (each prompt scored by one rank; answers of equal length).
void gatherTrials(DistGroup& group, std::vector<RetrievalTrial>& trials, int64_t answerLength);

}  // namespace xtrap
