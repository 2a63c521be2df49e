#include "attention_dump.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>

#include "data/wikitext.h"
#include "eval/model_interpolation.h"
#include "eval/pretrained_text.h"
#include "run/run_directory.h"
#include "util/execution_context.h"
#include "util/interrupt.h"

namespace xtrap {
namespace {

// sum_j p_ij |i - j| per query i of a block (H, Tq, Tk) starting at query q0: (H, Tq).
torch::Tensor meanAttentionDistance(const torch::Tensor& probs, int64_t q0) {
  auto i = torch::arange(q0, q0 + probs.size(1), torch::kFloat32).unsqueeze(1);
  auto j = torch::arange(0, probs.size(2), torch::kFloat32).unsqueeze(0);
  return (probs * (i - j).abs()).sum(-1);
}

// The observers' host boundary: a block of probabilities (1, H, Tq, Tk) on the model's device as
// (H, Tq, Tk) float32 on the host, where the statistics and the HDF5 writer read it.
torch::Tensor hostProbabilities(const torch::Tensor& probs) { return toHost(probs[0]).to(torch::kFloat32); }

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
    auto probs = hostProbabilities(probsIn);  // (H, Tq, Tk), float32: float64 temporaries doubled the dump's memory
    int64_t Tq = probs.size(1), Tk = probs.size(2);
    auto rows = torch::indexing::Slice(q0, q0 + Tq);
    entropy.index_put_({layer, torch::indexing::Slice(), rows}, -torch::special_xlogy(probs, probs).sum(-1));
    meanDistance.index_put_({layer, torch::indexing::Slice(), rows}, meanAttentionDistance(probs, q0));
    firstTokenMass.index_put_({layer, torch::indexing::Slice(), rows}, probs.select(2, 0));
    if (attnSets[layer] < 0) return;
    auto sel = torch::tensor(headSel, torch::kLong);
    auto padded = torch::zeros({int64_t(headSel.size()), Tq, N});
    padded.narrow(2, 0, Tk).copy_(probs.index_select(0, sel));
    h5.writeRows(attnSets[layer], headSel.size(), q0, Tq, N, padded.data_ptr<float>());
    if (biasSets[layer] >= 0) {
      auto onModel = torch::TensorOptions().dtype(torch::kFloat32).device(model->device());
      auto b = attentionBiasBlock(model->attentionBias(), model->config.causal(), q0, q0 + Tq, 0, N, onModel);
      auto full = torch::zeros({H, Tq, N});  // on the host
      if (b.defined()) full = full + toHost(b);
      full = full.index_select(0, sel).contiguous();
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

// Receives the same blocks as DumpObserver and pools the selected heads' probabilities into
// (cells, cells) maps as they stream by (sums now, means at the end): nothing N x N is kept.
struct PictureObserver : AttentionObserver {
  PictureObserver(const std::vector<int64_t>& layerSel, const std::vector<int64_t>& headSel, int64_t N, int64_t cells)
      : layerSel(layerSel), headSel(headSel), N(N), cells(cells) {
    auto bins = torch::empty({N}, torch::kLong);
    for (int64_t c = 0; c < cells; ++c)
      bins.narrow(0, poolStart(c, N, cells), poolStart(c + 1, N, cells) - poolStart(c, N, cells)).fill_(c);
    bin = bins;
    count = torch::zeros({cells}).index_add_(0, bin, torch::ones({N}));  // positions per cell
    for (size_t l = 0; l < layerSel.size(); ++l) {
      sums.push_back(torch::zeros({int64_t(headSel.size()), cells, cells}));
      distance.push_back(torch::zeros({int64_t(headSel.size()), N}));
    }
  }

  void onProbabilities(int64_t layer, int64_t q0, const torch::Tensor& probsIn) override {
    throwIfInterrupted();
    auto at = std::find(layerSel.begin(), layerSel.end(), layer);
    if (at == layerSel.end()) return;
    size_t l = size_t(at - layerSel.begin());
    auto probs = hostProbabilities(probsIn).index_select(0, torch::tensor(headSel, torch::kLong));  // (HS, Tq, Tk)
    int64_t Tq = probs.size(1), Tk = probs.size(2);
    distance[l].narrow(1, q0, Tq).copy_(meanAttentionDistance(probs, q0));
    auto byColumnCell = torch::zeros({probs.size(0), Tq, cells}).index_add_(2, bin.narrow(0, 0, Tk), probs);
    sums[l].index_add_(1, bin.narrow(0, q0, Tq), byColumnCell);  // (HS, cells, cells)
  }

  const std::vector<int64_t>& layerSel;
  const std::vector<int64_t>& headSel;
  int64_t N, cells;
  torch::Tensor bin, count;                   // (N) cell of each position, (cells) positions per cell
  std::vector<torch::Tensor> sums, distance;  // per selected layer: (HS, cells, cells), (HS, N)
};

// The window of `req` in the text, after checking the request against the model; applies the
// interpolation and returns the slopes / rotary settings now in use.
struct Window {
  std::vector<int32_t> tokens;
  std::vector<std::string> words;  // (N) the tokens as text, <bos> included
  double scale = 1;
  std::string slopes;
};

Window prepareWindow(Transformer& model, const ProbeText& text, const AttentionDumpRequest& req) {
  const TokenSpan& stream = text.stream;
  int64_t size = static_cast<int64_t>(stream.size());
  if (req.offset < 0 || req.offset >= size)
    throw std::invalid_argument(fmt::format("--offset {} is outside {} ({} tokens)", req.offset, text.source, size));
  // The window is <bos> + N - 1 words, or a pretrained encoder's [CLS] + N - 2 words + [SEP], as
  // in evaluation.
  int64_t bos = model->config.usesBos() ? 1 : 0;
  int64_t frame = bos + int64_t(text.before.size() + text.after.size());
  int64_t N = std::min(req.Lvalid, size - req.offset + frame);
  if (N < req.Lvalid)
    std::fprintf(stderr, "note: only %lld tokens from offset %lld; using N = %lld\n",
                 static_cast<long long>(size - req.offset), static_cast<long long>(req.offset),
                 static_cast<long long>(N));
  for (int64_t l : req.layers)
    if (l < 0 || l >= model->config.layers) throw std::invalid_argument(fmt::format("--layers: no layer {}", l));
  for (int64_t h : req.heads)
    if (h < 0 || h >= model->config.heads) throw std::invalid_argument(fmt::format("--heads: no head {}", h));
  Window w;
  // One window of N tokens: linear / ntk use a = --scale or N / L_train, dynamic-ntk
  // max(N / L_train, 1); at least 1 either way.
  w.scale = interpolationPlan(req.interp, N, model->config.contextLength, req.scale, 1.0).scaleFor(N);
  w.slopes = applyInterpolation(model, req.interp, w.scale, req.ntkHeads);
  ContextExtension extension = resolveContextExtension(req.extend, req.extensionSettings, model->config.contextLength);
  checkExtensionComposes(req.interp, extension);
  model->setContextExtension(extension);
  if (bos) {
    w.tokens.push_back(static_cast<int32_t>(model->config.bosId()));
    w.words.emplace_back(Vocabulary::kBos);
  }
  auto push = [&](int32_t id) {
    w.tokens.push_back(id);
    w.words.push_back(text.tokenText(id));
  };
  for (int32_t id : text.before) push(id);
  for (int64_t p = req.offset; p < req.offset + N - frame; ++p) push(stream[static_cast<size_t>(p)]);
  for (int32_t id : text.after) push(id);
  return w;
}

void runWindow(Transformer& model, const std::vector<int32_t>& tokens, int64_t queryBlock,
               AttentionObserver& observer) {
  torch::NoGradGuard noGrad;
  model->eval();
  auto x = torch::tensor(std::vector<int64_t>(tokens.begin(), tokens.end()), torch::kLong).unsqueeze(0);  // (1, N)
  model->features(x, {queryBlock, &observer});
}

std::vector<int64_t> allOr(const std::vector<int64_t>& selected, int64_t n) {
  if (!selected.empty()) return selected;
  std::vector<int64_t> all(n);
  for (int64_t i = 0; i < n; ++i) all[i] = i;
  return all;
}

}  // namespace

ProbeText loadProbeText(const RunInfo& run, const std::string& textFile, const std::string& dataDir,
                        const std::string& split) {
  ProbeText t;
  if (run.readsTokenizer()) {
    // A run trained from a pretrained directory reads its training data unless told otherwise.
    const bool ownData = !run.tokenizerFamily.empty() && textFile.empty() && dataDir.empty();
    PretrainedText text = loadPretrainedText(run, textFile, ownData ? run.train.dataDir : dataDir, split);
    t.stream = *text.ids;
    t.owner = text.ids;
    if (!run.model.causal()) {
      MlmTokens frame = pretrainedMlmTokens(*text.tokenizer, (run.dir / "tokenizer.json").string());
      t.before = {int32_t(frame.bosId)};
      t.after = {int32_t(frame.eosId)};
    }
    t.tokenText = [tokenizer = text.tokenizer](int32_t id) { return tokenizer->decode({id}); };
    t.source = textFile.empty() ? split : textFile;
    return t;
  }
  if (!textFile.empty() || !dataDir.empty())
    throw std::invalid_argument("--text and --data apply to pretrained models; " + run.dir.string() +
                                " is a word-level run, whose probes read its training data");
  return corpusProbeText(std::make_shared<const Corpus>(loadWikiText(run.train.dataDir)), split);
}

ProbeText corpusProbeText(std::shared_ptr<const Corpus> corpus, const std::string& split) {
  ProbeText t;
  t.stream = corpus->split(split);
  t.tokenText = [corpus](int32_t id) { return corpus->vocab.word(id); };
  t.source = split;
  t.owner = std::move(corpus);
  return t;
}

RunPicture attentionPicture(const RunInfo& run, Transformer& model, const ProbeText& text,
                            const AttentionDumpRequest& req, int64_t maxCells) {
  Window w = prepareWindow(model, text, req);
  int64_t N = int64_t(w.tokens.size()), cells = std::min(N, maxCells);
  std::vector<int64_t> layerSel = allOr(req.layers, model->config.layers),
                       headSel = allOr(req.heads, model->config.heads);
  PictureObserver observer(layerSel, headSel, N, cells);
  runWindow(model, w.tokens, req.queryBlock, observer);

  std::vector<double> slopes;  // ALiBi family only: "0.5 0.25 ..." (rotary prints "base=...")
  if (isLinearBias(model->config.position())) {
    std::istringstream in(w.slopes);
    for (double m; in >> m;) slopes.push_back(m);
  }
  RunPicture picture;
  picture.label = (run.dir.filename().empty() ? run.dir.parent_path() : run.dir).filename().string();
  picture.pos = model->config.pos;
  picture.Ltrain = model->config.contextLength;
  picture.N = N, picture.cells = cells;
  picture.causal = model->config.causal();
  auto cellArea = observer.count.unsqueeze(1) * observer.count.unsqueeze(0);  // (cells, cells)
  for (size_t l = 0; l < layerSel.size(); ++l) {
    auto means = (observer.sums[l] / cellArea).contiguous();  // (HS, cells, cells)
    auto distance = observer.distance[l].contiguous();        // (HS, N)
    for (size_t k = 0; k < headSel.size(); ++k) {
      HeadPicture h;
      h.layer = layerSel[l], h.head = headSel[k];
      h.slope = size_t(h.head) < slopes.size() ? slopes[h.head] : 0;
      h.map.assign(means[k].data_ptr<float>(), means[k].data_ptr<float>() + cells * cells);
      h.meanDistance.assign(distance[k].data_ptr<float>(), distance[k].data_ptr<float>() + N);
      picture.heads.push_back(std::move(h));
    }
  }
  return picture;
}

void dumpAttention(const RunInfo& run, Transformer& model, const ProbeText& text, const AttentionDumpRequest& req) {
  Window w = prepareWindow(model, text, req);
  const std::vector<int32_t>& tokens = w.tokens;
  int64_t N = int64_t(tokens.size());
  double a = w.scale;
  const std::string& slopes = w.slopes;
  const std::vector<std::string>& words = w.words;

  Hdf5Writer h5(req.out);
  h5.attribute("xtrap_version", xtrapVersion());
  h5.attribute("run_config", nlohmann::json{{"model", run.model}, {"train", run.train}}.dump());
  h5.attribute("arch", run.model.arch);
  h5.attribute("pos", run.model.pos);
  h5.attribute("L_train", run.model.contextLength);
  h5.attribute("Lvalid", N);
  h5.attribute("offset", req.offset);
  h5.attribute("split", text.source);
  h5.attribute("interp", interpLabel(req.interp, req.ntkHeads));
  h5.attribute("extend", model->contextExtension().label());
  h5.attribute("scale", a);
  h5.attribute("slopes", slopes);
  h5.ints("tokens", {hsize_t(N)}, tokens.data());
  h5.strings("words", words);
  {
    DumpObserver observer(h5, model, req, N);
    runWindow(model, tokens, req.queryBlock, observer);
    h5.group("stats");
    auto dims = std::vector<hsize_t>{hsize_t(observer.layers), hsize_t(observer.H), hsize_t(N)};
    h5.floats("stats/entropy", dims, observer.entropy.contiguous().data_ptr<float>());
    h5.floats("stats/mean_distance", dims, observer.meanDistance.contiguous().data_ptr<float>());
    h5.floats("stats/first_token_mass", dims, observer.firstTokenMass.contiguous().data_ptr<float>());
  }
  h5.commit();
}

}  // namespace xtrap
