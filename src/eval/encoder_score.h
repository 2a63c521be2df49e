#pragma once
// Masked-LM scoring of a stream with a trained encoder: MLM perplexity = exp(mean NLL over the
// masked positions). A window of Lvalid positions holds <bos> + Lvalid - 1 words when the encoder
// uses <bos> (as RoBERTa's 512 include <s>), else Lvalid words; a pretrained encoder's window is
// [CLS] + Lvalid - 2 words + [SEP] (MlmTokens::eosId). The frame is never masked or scored.
// Masks depend only on (maskSeed, absolute position) (aligned blocks, mlm_masking.h), so every
// encoder, Lvalid and stride scores the same tokens with the same corruptions. Each window is
// corrupted as a training window is (every selected token inside it, ~maskProb of its words)
// but scores only the selected tokens it owns (bestEncoderWindow): overlapping sliding windows
// see the same corruption rate as non-overlapping ones.
#include <functional>
#include <vector>

#include "data/masked_batch.h"
#include "data/mlm_masking.h"
#include "eval/perplexity.h"
#include "eval/windows.h"

namespace xtrap {

// Bumped whenever encoder scoring changes its numbers (2: 64-token mask blocks, a fixed mask
// seed, overlapping windows fully corrupted), so cached results of older versions are not reused.
constexpr int kEncoderScoringVersion = 2;

// stride: 0 = Lvalid (non-overlapping); else each token is scored in its most central window.
struct EncoderScoreOptions : WindowScoring {
  uint64_t maskSeed = kEvalMaskSeed;
  double maskProb = 0.15;
  MlmTokens mlm;  // ModelConfig::mlmTokens()
};

// The windows of `words` words (plus <bos> when opt.mlm has one) that scoreEncoder cuts from a
// stream, and the window stride it uses (stride <= words).
struct EncoderWindowing {
  int64_t words = 0, stride = 0;
  std::vector<EvalWindow> windows;
};
EncoderWindowing encoderWindowing(int64_t streamLength, const EncoderScoreOptions& opt);

// The corrupted batch of windows w.windows[rows[b]] (all of one length): inputs (B, [<bos>] +
// length) with every selected token inside each window corrupted; positions/targets: only the
// selected tokens each window owns.
MaskedBatch maskEncoderWindows(TokenSpan stream, const EncoderWindowing& w, const std::vector<size_t>& rows,
                               const EncoderScoreOptions& opt);

ScoreTotals scoreEncoder(Transformer& model, TokenSpan stream, const EncoderScoreOptions& opt,
                         const std::function<void(int64_t)>& onProgress = {});

// Pseudo-log-likelihood (Salazar et al., 2020): non-overlapping windows of Lvalid positions, each
// word of a window masked alone ([MASK], never the 80/10/10 corruption) in its own copy of the
// window, every word of the stream scored once. A window of T words costs T forward passes,
// opt.batch copies a pass; opt.maskProb and the mask seed play no part.
ScoreTotals scoreEncoderPll(Transformer& model, TokenSpan stream, const EncoderScoreOptions& opt,
                            const std::function<void(int64_t)>& onProgress = {});

}  // namespace xtrap
