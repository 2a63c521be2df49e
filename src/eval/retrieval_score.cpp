#include "eval/retrieval_score.h"

#include <stdexcept>

#include "util/execution_context.h"
#include "util/interrupt.h"

namespace xtrap {

void RetrievalTotals::sumOverRanks(DistGroup& group) {
  if (group.world() == 1) return;
  if (!kl.empty()) throw std::logic_error("RetrievalTotals: compared totals are scored by one process");
  auto summed = torch::tensor({double(trials), double(correct), double(answerTokens), answerLogProb}, torch::kFloat64);
  group.allreduceSum(summed);
  auto acc = summed.accessor<double, 1>();
  trials = int64_t(acc[0]), correct = int64_t(acc[1]), answerTokens = int64_t(acc[2]);
  answerLogProb = acc[3];
}

void gatherTrials(DistGroup& group, std::vector<RetrievalTrial>& trials, int64_t answerLength) {
  if (group.world() == 1) return;
  // [predicted..., log-probabilities...] of every trial, zeros where another rank scored it.
  auto n = int64_t(trials.size());
  auto summed = torch::zeros({2, n, answerLength}, torch::kFloat64);
  auto acc = summed.accessor<double, 3>();
  for (int64_t k = 0; k < n; ++k)
    for (size_t j = 0; j < trials[size_t(k)].predicted.size(); ++j) {
      acc[0][k][int64_t(j)] = double(trials[size_t(k)].predicted[j]);
      acc[1][k][int64_t(j)] = trials[size_t(k)].answerLogProb[j];
    }
  group.allreduceSum(summed);
  for (int64_t k = 0; k < n; ++k) {
    RetrievalTrial& t = trials[size_t(k)];
    t.predicted.assign(size_t(answerLength), 0);
    t.answerLogProb.assign(size_t(answerLength), 0);
    for (int64_t j = 0; j < answerLength; ++j) {
      t.predicted[size_t(j)] = int64_t(acc[0][k][j]);
      t.answerLogProb[size_t(j)] = acc[1][k][j];
    }
  }
}

RetrievalTotals scoreRetrieval(Transformer& model, const std::vector<RetrievalPrompt>& prompts,
                               const RetrievalScoreOptions& opt, std::vector<RetrievalTrial>* trials) {
  if (trials) trials->assign(prompts.size(), {});
  torch::NoGradGuard noGrad;
  model->eval();
  bool causal = model->config.causal();
  Transformer base = opt.klBase;
  if (base && !causal) throw std::invalid_argument("scoreRetrieval: a base model is compared with decoders only");
  if (base) base->eval();
  int64_t shift = causal ? 0 : opt.mlm.bosColumns();  // an encoder's <bos> column
  std::vector<size_t> mine;
  for (size_t k = 0; k < prompts.size(); ++k)
    if (opt.shard.owns(k)) mine.push_back(k);
  RetrievalTotals totals;
  for (size_t g = 0; g < mine.size(); g += size_t(opt.batch)) {
    throwIfInterrupted();
    size_t gEnd = std::min(mine.size(), g + size_t(opt.batch));
    auto T = int64_t(prompts[mine[g]].tokens.size()) + shift;
    std::vector<int64_t> inputs, rows, targets, trialOfRow;
    for (size_t i = g; i < gEnd; ++i) {
      const RetrievalPrompt& p = prompts[mine[i]];
      if (int64_t(p.tokens.size()) + shift != T)
        throw std::invalid_argument("scoreRetrieval: prompts of unequal length");
      auto b = int64_t(i - g);
      if (shift) inputs.push_back(opt.mlm.bosId);
      for (size_t j = 0; j < p.tokens.size(); ++j)
        inputs.push_back(!causal && int64_t(j) >= p.answerBegin ? opt.mlm.maskId : p.tokens[j]);
      for (int64_t j = p.answerBegin; j < int64_t(p.tokens.size()); ++j) {
        // The row whose output predicts token j: the one before it (decoder), its own (encoder).
        rows.push_back(b * T + shift + (causal ? j - 1 : j));
        targets.push_back(p.tokens[size_t(j)]);
        trialOfRow.push_back(b);
      }
    }
    auto B = int64_t(gEnd - g);
    auto x = torch::tensor(inputs, torch::kLong).reshape({B, T});
    auto feats = model->features(x, {opt.queryBlock, nullptr});  // (B, T, C)
    auto picked = feats.reshape({-1, feats.size(2)}).index_select(0, model->input(torch::tensor(rows, torch::kLong)));
    auto logProbs = torch::log_softmax(model->logits(picked).to(torch::kFloat32), -1);  // (N, V)
    auto want = model->input(torch::tensor(targets, torch::kLong));
    auto argmax = logProbs.argmax(-1);                                                                  // (N)
    auto hit = toHost(argmax.eq(want));                                                                 // (N)
    auto answerLogProb = toHost(logProbs.gather(1, want.unsqueeze(1)).squeeze(1).to(torch::kFloat64));  // (N)
    if (trials) {
      auto predicted = toHost(argmax);
      auto p = predicted.accessor<int64_t, 1>();
      auto lp = answerLogProb.accessor<double, 1>();
      for (size_t r = 0; r < trialOfRow.size(); ++r) {
        RetrievalTrial& t = (*trials)[mine[g + size_t(trialOfRow[r])]];
        t.predicted.push_back(p[int64_t(r)]);
        t.answerLogProb.push_back(lp[int64_t(r)]);
      }
    }
    std::vector<bool> allRight(size_t(B), true);
    auto hits = hit.accessor<bool, 1>();
    for (size_t r = 0; r < trialOfRow.size(); ++r)
      if (!hits[int64_t(r)]) allRight[size_t(trialOfRow[r])] = false;
    for (bool right : allRight) totals.correct += right ? 1 : 0;
    totals.trials += B;
    totals.answerTokens += int64_t(rows.size());
    totals.answerLogProb += answerLogProb.sum().item<double>();
    if (base) {
      auto baseFeats = base->features(x, {opt.queryBlock, nullptr});  // (B, T, C)
      auto basePicked =
          baseFeats.reshape({-1, baseFeats.size(2)}).index_select(0, base->input(torch::tensor(rows, torch::kLong)));
      KlRows kl = compareRows(model, picked, base, basePicked, want);  // (N) each
      auto values = kl.kl.contiguous();
      totals.kl.insert(totals.kl.end(), values.data_ptr<double>(), values.data_ptr<double>() + values.numel());
      totals.sameTop += kl.sameTop.sum().item<int64_t>();
      totals.baseNll += kl.baseNll.sum().item<double>();
      totals.comparedNll += kl.nll.sum().item<double>();
    }
  }
  return totals;
}

}  // namespace xtrap
