#include "train/validation_loss.h"

#include <algorithm>

#include "eval/encoder_score.h"
#include "eval/perplexity.h"
#include "util/interrupt.h"

namespace xtrap {

double validationLoss(Transformer& model, const Corpus& corpus, const TrainConfig& t, DistGroup& group) {
  DeferInterrupts defer;  // the training loop checkpoints first, then stops
  const auto& valid = corpus.valid;
  TokenSpan head = valid.subspan(0, size_t(std::min<int64_t>(t.evalTokens, valid.size())));
  WindowShard shard{group.rank(), group.world()};
  ScoreTotals totals;
  if (model->config.causal()) {
    ScoreOptions opt;
    opt.Lvalid = model->config.contextLength;
    opt.shard = shard;
    opt.eos = corpus.contextToken();
    totals = scoreDecoder(model, head, opt);
  } else {
    EncoderScoreOptions opt;
    opt.Lvalid = model->config.contextLength;
    opt.maskProb = t.maskProb;
    opt.shard = shard;
    opt.mlm = model->config.mlmTokens(corpus.vocab);
    totals = scoreEncoder(model, head, opt);
  }
  totals.sumOverRanks(group);
  model->train();
  return totals.meanNll();
}

}  // namespace xtrap
