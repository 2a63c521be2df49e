#pragma once
// Masked-LM scoring of a stream with a trained encoder: MLM perplexity = exp(mean NLL over the
// masked positions). A window of Lvalid positions holds <bos> + Lvalid - 1 words when the encoder
// uses <bos> (as RoBERTa's 512 include <s>), else Lvalid words; <bos> is never masked or scored.
// Masks depend only on (maskSeed, absolute position) (aligned blocks, mlm_masking.h), so every
// Lvalid and every stride scores the same tokens with the same corruptions.
#include <functional>
#include <vector>

#include "data/mlm_masking.h"
#include "eval/perplexity.h"

namespace xtrap {

// stride: 0 = Lvalid (non-overlapping); else each token is scored in its most central window.
struct EncoderScoreOptions : WindowScoring {
  uint64_t maskSeed = 1;
  double maskProb = 0.15;
  MlmTokens mlm;  // ModelConfig::mlmTokens()
};

ScoreTotals scoreEncoder(Transformer& model, const std::vector<int32_t>& stream, const EncoderScoreOptions& opt,
                         const std::function<void(int64_t)>& onProgress = {});

}  // namespace xtrap
