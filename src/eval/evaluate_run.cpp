#include "eval/evaluate_run.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <stdexcept>

#include "data/wikitext.h"
#include "eval/encoder_score.h"
#include "eval/windows.h"
#include "model/flops.h"
#include "run/checkpoint.h"
#include "run/run_directory.h"
#include "util/atomic_file.h"
#include "util/progress_bar.h"
#include "util/runtime.h"

namespace xtrap {

namespace {
std::vector<double> toDoubles(const torch::Tensor& t) {
  auto c = t.detach().to(torch::kFloat64).contiguous();
  return {c.data_ptr<double>(), c.data_ptr<double>() + c.numel()};
}
// The slopes of the heads not blocked in this direction, in head order.
std::string joinSlopes(const std::vector<double>& slopes, const std::vector<bool>& blocked) {
  std::string s;
  for (size_t h = 0; h < slopes.size(); ++h)
    if (!blocked[h]) s += fmt::format("{}{:.5g}", s.empty() ? "" : " ", slopes[h]);
  return s;
}
// Model FLOPs of one scoring pass: every window's forward plus the head on the scored rows.
double evalFlops(const ModelConfig& c, const std::vector<int32_t>& stream, int64_t Lvalid, int64_t stride,
                 int64_t scoredRows) {
  auto n = static_cast<int64_t>(stream.size());
  int64_t bos = c.usesBos() ? 1 : 0;  // encoder windows: [<bos>] + words (encoder_score.h)
  auto windows =
      c.causal() ? decoderWindows(n, Lvalid, stride) : encoderWindows(n, Lvalid - bos, std::min(stride, Lvalid - bos));
  double flops = 0;
  for (const auto& w : windows) flops += bodyForwardFlops(c, bos + w.length);
  return flops + double(scoredRows) * headForwardFlopsPerRow(c, adaptiveClusterShares(c, stream));
}
}  // namespace

std::string applyInterpolation(Transformer& model, Interp interp, double a) {
  if (interp != Interp::None && !model->linearBias() && !model->rotary())
    throw std::invalid_argument("--interp " + interpName(interp) + " applies to ALiBi-family and rotary methods, not " +
                                model->config.pos);
  std::string used;
  if (LinearBias* lb = model->linearBias()) {
    const LinearBiasSpec& spec = lb->spec();
    auto H = static_cast<size_t>(model->config.heads);
    lb->setSlopeDivisors(std::vector<double>(H, 1.0), std::vector<double>(H, 1.0));
    auto past = toDoubles(lb->slopePast()), future = toDoubles(lb->slopeFuture());
    SlopeDivisors d = directionalSlopeDivisors(interp, a, past, future, spec.blockPast, spec.blockFuture);
    lb->setSlopeDivisors(d.past, d.future);
    past = toDoubles(lb->slopePast());
    future = toDoubles(lb->slopeFuture());
    // One list where past and future slopes are the same numbers (alibi, alibi-offset); else the
    // unblocked heads of each direction (one-sided halves, learned past/future slopes).
    bool anyFuture = std::find(spec.blockFuture.begin(), spec.blockFuture.end(), false) != spec.blockFuture.end();
    bool symmetric = !spec.learnedSlopes && spec.blockPast == spec.blockFuture && spec.slopePast == spec.slopeFuture;
    if (!anyFuture || symmetric)
      used = joinSlopes(past, spec.blockPast);
    else
      used = "past " + joinSlopes(past, spec.blockPast) + " | future " + joinSlopes(future, spec.blockFuture);
  }
  if (Rotary* rot = model->rotary()) {
    RotarySettings r = rotaryInterpolation(interp, a, model->config.rotaryBase, rot->headDim);
    rot->base = r.base;
    rot->positionScale = r.positionScale;
    used = fmt::format("base={:.6g} pos_scale={:.6g}", r.base, r.positionScale);
  }
  model->clearBiasCache();
  return used;
}

std::vector<EvalRow> evaluateRuns(const EvalRequest& req, std::vector<PositionLossRow>* positionRows) {
  configureRuntime(req.threads);
  DistGroup group;  // under torchrun / --nproc the ranks split every pass's windows
  WindowShard shard{group.rank(), group.world()};
  std::vector<EvalRow> rows;
  for (const auto& dir : req.runs) {
    RunInfo run = readRunInfo(dir);
    std::string dataDir = req.dataDir.empty() ? run.train.dataDir : req.dataDir;
    Corpus corpus = loadWikiText(dataDir);
    int64_t vocab = corpus.vocab.size() + run.model.specialTokens();
    if (vocab != run.model.vocabSize)
      throw std::runtime_error(fmt::format("vocabulary mismatch: run {} was trained with {} words, {} gives {}",
                                           dir.string(), run.model.vocabSize, dataDir, vocab));
    Transformer model = loadTrainedModel(run);
    std::vector<int32_t> stream = corpus.split(req.split);
    if (req.maxTokens > 0 && req.maxTokens < static_cast<int64_t>(stream.size())) stream.resize(req.maxTokens);
    int64_t L = run.model.contextLength;
    std::string name = dir.filename().string();
    int64_t maxLvalid = *std::max_element(req.lvalids.begin(), req.lvalids.end());
    for (Interp interp : req.interps) {
      InterpolationPlan plan = interpolationPlan(interp, maxLvalid, L, req.scale, req.a0);
      if (interp == Interp::Linear || interp == Interp::Ntk)
        std::fprintf(stderr, "%s interp=%s: fixed a = %.6g for the sweep (%s)\n", name.c_str(),
                     interpName(interp).c_str(), plan.fixedScale,
                     req.scale > 0 ? "--scale"
                                   : fmt::format("largest Lvalid {} / L_train {}, at least 1", maxLvalid, L).c_str());
      // dynamic-ntk: every group of equal-length windows gets its own a (the last partial too).
      auto prepareLength = [&](int64_t windowLength) {
        applyInterpolation(model, interp, plan.scaleFor(windowLength));
      };
      for (int64_t Lvalid : req.lvalids) {
        if (group.isRoot() && Lvalid >= static_cast<int64_t>(stream.size()))
          std::fprintf(stderr, "note: Lvalid %lld exceeds the %s split (%zu tokens); scoring one window of all of it\n",
                       static_cast<long long>(Lvalid), req.split.c_str(), stream.size());
        double a = plan.scaleFor(Lvalid);
        std::string used = applyInterpolation(model, interp, a);
        // The row's scale and slopes are those of its full-length windows; dynamic-ntk gives a
        // shorter last window its own.
        if (req.verbose && !used.empty() && group.isRoot())
          std::fprintf(stderr, "%s Lvalid=%lld interp=%s a=%.4g%s: %s\n", name.c_str(), static_cast<long long>(Lvalid),
                       interpName(interp).c_str(), a,
                       interp == Interp::DynamicNtk
                           ? fmt::format(" (a = max({:g} * len / {}, 1) per window)", req.a0, L).c_str()
                           : "",
                       used.c_str());
        for (const auto& mode : req.modes) {
          if (mode != "nonoverlap" && mode != "sliding")
            throw std::invalid_argument("unknown --mode '" + mode + "' (valid: nonoverlap, sliding, both)");
          int64_t stride =
              mode == "nonoverlap" ? Lvalid : std::clamp<int64_t>(req.stride > 0 ? req.stride : L / 2, 1, Lvalid);
          std::optional<ProgressBar> bar;
          int64_t expected =
              run.model.causal() ? int64_t(stream.size()) : int64_t(double(stream.size()) * run.train.maskProb);
          if (req.progress && group.isRoot())
            bar.emplace(fmt::format("eval {} Lvalid={} {}", name, Lvalid, mode), expected);
          auto progress = [&](int64_t done) {
            if (bar) bar->update(std::min(done, expected));
          };
          auto t0 = std::chrono::steady_clock::now();
          ScoreTotals totals;
          if (run.model.causal()) {
            ScoreOptions opt{
                Lvalid,       stride, req.batch, req.queryBlock, req.positionBuckets, shard, corpus.vocab.eos(),
                prepareLength};
            totals = scoreDecoder(model, stream, opt, progress);
          } else {
            EncoderScoreOptions opt{Lvalid,
                                    stride,
                                    req.batch,
                                    req.queryBlock,
                                    run.train.seed,
                                    run.train.maskProb,
                                    req.positionBuckets,
                                    shard,
                                    run.model.mlmTokens(corpus.vocab),
                                    prepareLength};
            totals = scoreEncoder(model, stream, opt, progress);
          }
          totals.sumOverRanks(group);
          double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
          if (bar) bar->finish();
          EvalRow r;
          r.run = name;
          r.arch = run.model.arch;
          r.pos = run.model.pos;
          r.Ltrain = L;
          r.Lvalid = Lvalid;
          r.split = req.split;
          r.mode = mode;
          r.stride = stride;
          r.interp = interpName(interp);
          r.scale = a;
          r.slopes = used;
          r.tokensScored = totals.tokens;
          r.nll = totals.meanNll();
          r.ppl = std::exp(r.nll);
          r.seconds = seconds;
          r.tokensPerSecond = double(totals.tokens) / std::max(seconds, 1e-9);
          r.flopsPerSecond = evalFlops(run.model, stream, Lvalid, stride, totals.tokens) / std::max(seconds, 1e-9);
          rows.push_back(r);
          if (positionRows) {
            for (size_t b = 0; b < totals.bucketNll.size(); ++b) {
              PositionLossRow p{name,
                                mode,
                                r.interp,
                                Lvalid,
                                int64_t(b),
                                int64_t(b) * Lvalid / req.positionBuckets,
                                (int64_t(b) + 1) * Lvalid / req.positionBuckets,
                                totals.bucketTokens[b],
                                totals.bucketTokens[b] ? totals.bucketNll[b] / double(totals.bucketTokens[b]) : NAN};
              positionRows->push_back(p);
            }
          }
        }
      }
    }
  }
  return rows;
}

void writePositionRows(const std::filesystem::path& file, const std::vector<PositionLossRow>& rows) {
  std::string csv = "run,mode,interp,Lvalid,bucket,position_begin,position_end,tokens,mean_nll\n";
  for (const auto& p : rows)
    csv += fmt::format("{},{},{},{},{},{},{},{},{:.6f}\n", p.run, p.mode, p.interp, p.Lvalid, p.bucket, p.positionBegin,
                       p.positionEnd, p.tokens, p.meanNll);
  writeTextAtomically(file, csv);
}

}  // namespace xtrap
