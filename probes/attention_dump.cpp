#include "attention_dump.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <stdexcept>

#include "data/wikitext.h"
#include "eval/evaluate_run.h"
#include "run/run_directory.h"
#include "util/interrupt.h"

namespace xtrap {
namespace {

// Receives each block of probabilities (1, H, Tq, Tk): accumulates per-query statistics for all
// heads and streams the selected heads' rows (zero-padded to N keys) into the file.
struct DumpObserver : AttentionObserver {
  DumpObserver(Hdf5Writer& h5, Transformer& model, const AttentionDumpRequest& req, int64_t N)
      : h5(h5), model(model), req(req), N(N), H(model->config.heads), layers(model->config.layers) {
    entropy = torch::zeros({layers, H, N});
    meanDistance = torch::zeros({layers, H, N});
    firstTokenMass = torch::zeros({layers, H, N});
    for (int64_t h = 0; h < H; ++h)
      if (req.heads.empty() || std::count(req.heads.begin(), req.heads.end(), h)) headSel.push_back(h);
    for (int64_t l = 0; l < layers; ++l) {
      bool dump = !req.statsOnly && (req.layers.empty() || std::count(req.layers.begin(), req.layers.end(), l));
      std::string g = fmt::format("layer_{:02}", l);
      if (!dump) {
        attnSets.push_back(-1), biasSets.push_back(-1);
        continue;
      }
      h5.group(g);
      auto HS = hsize_t(headSel.size());
      auto chunkRows = hsize_t(attentionBlockRows(N, req.queryBlock));  // one chunk row-block per attention block
      attnSets.push_back(h5.createRowChunked(g + "/attn", HS, N, N, chunkRows, req.dtype));
      biasSets.push_back(req.withBias ? h5.createRowChunked(g + "/bias", HS, N, N, chunkRows, StoredFloat::Float32)
                                      : -1);
    }
  }
  ~DumpObserver() override {
    for (hid_t d : attnSets)
      if (d >= 0) h5.closeDataset(d);
    for (hid_t d : biasSets)
      if (d >= 0) h5.closeDataset(d);
  }

  void onProbabilities(int64_t layer, int64_t q0, const torch::Tensor& probsIn) override {
    // Unwinds through ~Hdf5Writer, which deletes the temporary file.
    throwIfInterrupted();
    auto probs = probsIn[0];  // (H, Tq, Tk), float32: float64 temporaries doubled the dump's memory
    int64_t Tq = probs.size(1), Tk = probs.size(2);
    auto i = torch::arange(q0, q0 + Tq, torch::kFloat32).unsqueeze(1);
    auto j = torch::arange(0, Tk, torch::kFloat32).unsqueeze(0);
    auto rows = torch::indexing::Slice(q0, q0 + Tq);
    entropy.index_put_({layer, torch::indexing::Slice(), rows}, -torch::special_xlogy(probs, probs).sum(-1));
    meanDistance.index_put_({layer, torch::indexing::Slice(), rows}, (probs * (i - j).abs()).sum(-1));
    firstTokenMass.index_put_({layer, torch::indexing::Slice(), rows}, probs.select(2, 0));
    if (attnSets[layer] < 0) return;
    auto sel = torch::tensor(headSel, torch::kLong);
    auto padded = torch::zeros({int64_t(headSel.size()), Tq, N});
    padded.narrow(2, 0, Tk).copy_(probsIn[0].index_select(0, sel));
    h5.writeRows(attnSets[layer], headSel.size(), q0, Tq, N, padded.data_ptr<float>());
    if (biasSets[layer] >= 0) {
      auto b = attentionBiasBlock(model->attentionBias(), model->config.causal(), q0, q0 + Tq, 0, N);
      auto full =
          (b.defined() ? torch::zeros({H, Tq, N}) + b : torch::zeros({H, Tq, N})).index_select(0, sel).contiguous();
      h5.writeRows(biasSets[layer], headSel.size(), q0, Tq, N, full.data_ptr<float>());
    }
  }

  Hdf5Writer& h5;
  Transformer& model;
  const AttentionDumpRequest& req;
  int64_t N, H, layers;
  std::vector<int64_t> headSel;
  std::vector<hid_t> attnSets, biasSets;
  torch::Tensor entropy, meanDistance, firstTokenMass;  // (layers, H, N)
};

}  // namespace

void dumpAttention(const RunInfo& run, Transformer& model, const Corpus& corpus, const AttentionDumpRequest& req) {
  const auto& stream = corpus.split(req.split);
  int64_t size = static_cast<int64_t>(stream.size());
  if (req.offset < 0 || req.offset >= size)
    throw std::invalid_argument(
        fmt::format("--offset {} is outside the {} split ({} tokens)", req.offset, req.split, size));
  int64_t bos = model->config.usesBos() ? 1 : 0;  // the window is <bos> + N - 1 words, as in evaluation
  int64_t N = std::min(req.Lvalid, size - req.offset + bos);
  if (N < req.Lvalid)
    std::fprintf(stderr, "note: only %lld tokens from offset %lld; dumping N = %lld\n",
                 static_cast<long long>(size - req.offset), static_cast<long long>(req.offset),
                 static_cast<long long>(N));
  for (int64_t l : req.layers)
    if (l < 0 || l >= model->config.layers) throw std::invalid_argument(fmt::format("--layers: no layer {}", l));
  for (int64_t h : req.heads)
    if (h < 0 || h >= model->config.heads) throw std::invalid_argument(fmt::format("--heads: no head {}", h));
  double a = interpolationScale(req.interp, N, model->config.contextLength, req.scale, 1.0);
  std::string slopes = applyInterpolation(model, req.interp, a);

  std::vector<int32_t> tokens;
  std::vector<std::string> words;
  if (bos) {
    tokens.push_back(static_cast<int32_t>(model->config.bosId()));
    words.emplace_back(Vocabulary::kBos);
  }
  for (int64_t p = req.offset; p < req.offset + N - bos; ++p) {
    tokens.push_back(stream[static_cast<size_t>(p)]);
    words.push_back(corpus.vocab.word(tokens.back()));
  }

  Hdf5Writer h5(req.out);
  h5.attribute("xtrap_version", xtrapVersion());
  h5.attribute("run_config", nlohmann::json{{"model", run.model}, {"train", run.train}}.dump());
  h5.attribute("arch", run.model.arch);
  h5.attribute("pos", run.model.pos);
  h5.attribute("L_train", run.model.contextLength);
  h5.attribute("Lvalid", N);
  h5.attribute("offset", req.offset);
  h5.attribute("split", req.split);
  h5.attribute("interp", interpName(req.interp));
  h5.attribute("scale", a);
  h5.attribute("slopes", slopes);
  h5.ints("tokens", {hsize_t(N)}, tokens.data());
  h5.strings("words", words);
  {
    DumpObserver observer(h5, model, req, N);
    torch::NoGradGuard noGrad;
    model->eval();
    auto x = torch::tensor(std::vector<int64_t>(tokens.begin(), tokens.end()), torch::kLong).unsqueeze(0);
    model->features(x, {req.queryBlock, &observer});
    h5.group("stats");
    auto dims = std::vector<hsize_t>{hsize_t(observer.layers), hsize_t(observer.H), hsize_t(N)};
    h5.floats("stats/entropy", dims, observer.entropy.contiguous().data_ptr<float>());
    h5.floats("stats/mean_distance", dims, observer.meanDistance.contiguous().data_ptr<float>());
    h5.floats("stats/first_token_mass", dims, observer.firstTokenMass.contiguous().data_ptr<float>());
  }
  h5.commit();
}

}  // namespace xtrap
