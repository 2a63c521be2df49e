// The block parts of pretrained families, each against its formula computed a different way:
// the norms by hand, grouped-query attention against a per-head loop over repeated keys and
// values, the sliding window and the soft-cap against an explicit mask and tanh, the gated MLP
// against its three products, and parameterShapes() against built models' parameters.
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>

#include "model/attention.h"
#include "model/norm.h"
#include "model/parameter_shapes.h"
#include "model/transformer.h"
#include "test_support.h"

using namespace xtrap;

namespace {

// softmax_j(cap tanh(q_h . k_{h/G} / cap) masked) v_{h/G}, one head and one query at a time, in
// float64: q (B, H, T, D), k and v (B, KV, T, D); window 0 = all earlier keys; cap 0 = none.
torch::Tensor loopAttention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, int64_t window,
                            double cap) {
  auto qd = q.to(torch::kFloat64), kd = k.to(torch::kFloat64), vd = v.to(torch::kFloat64);
  int64_t B = q.size(0), H = q.size(1), T = q.size(2), KV = k.size(1), G = H / KV;
  auto out = torch::zeros_like(qd);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < T; ++i) {
        int64_t first = window > 0 ? std::max<int64_t>(0, i - window + 1) : 0;
        auto keys = kd[b][h / G].narrow(0, first, i + 1 - first);  // (n, D)
        auto s = keys.matmul(qd[b][h][i]);                         // (n)
        if (cap > 0) s = torch::tanh(s / cap) * cap;
        out[b][h][i] = torch::softmax(s, 0).matmul(vd[b][h / G].narrow(0, first, i + 1 - first));
      }
  return out;
}

double maxDiff(const torch::Tensor& a, const torch::Tensor& b) {
  return (a.to(torch::kFloat64) - b.to(torch::kFloat64)).abs().max().item<double>();
}

}  // namespace

TEST_CASE("norms follow their formulas: LayerNorm, RMSNorm (w after the cast back), Gemma's x_hat (1 + w)",
          "[block-parts]") {
  torch::manual_seed(3);
  auto x = torch::randn({2, 5, 8}) * 3 + 1;
  auto w = torch::randn({8});
  auto b = torch::randn({8});
  auto rms = (x.to(torch::kFloat64).pow(2).mean(-1, true) + 1e-6).sqrt();
  auto xhat = x.to(torch::kFloat64) / rms;
  Norm layer(NormKind::Layer, 8, 1e-6), plain(NormKind::Rms, 8, 1e-6), onePlus(NormKind::RmsOnePlus, 8, 1e-6);
  {
    torch::NoGradGuard g;
    layer->weight.copy_(w), layer->bias.copy_(b), plain->weight.copy_(w), onePlus->weight.copy_(w);
  }
  auto mean = x.to(torch::kFloat64).mean(-1, true), var = x.to(torch::kFloat64).var(-1, false, true);
  CHECK(maxDiff(layer(x), (x - mean) / (var + 1e-6).sqrt() * w + b) < 1e-5);
  CHECK(maxDiff(plain(x), xhat * w.to(torch::kFloat64)) < 1e-5);
  CHECK(maxDiff(onePlus(x), xhat * (1 + w.to(torch::kFloat64))) < 1e-5);
  CHECK(!plain->bias.defined());
  CHECK(onePlus->weight.abs().sum().item<double>() > 0);
  CHECK(Norm(NormKind::RmsOnePlus, 4, 1e-6)->weight.abs().sum().item<double>() == 0);  // starts as the identity
}

TEST_CASE("grouped-query attention, windows and soft-caps equal a per-head loop on every query-block path",
          "[block-parts]") {
  torch::manual_seed(5);
  const int64_t B = 2, H = 6, T = 300, D = 8;
  for (int64_t KV : {6, 3, 1})
    for (int64_t window : {0, 37})
      for (double cap : {0.0, 2.0}) {
        auto q = torch::randn({B, H, T, D}), k = torch::randn({B, KV, T, D}), v = torch::randn({B, KV, T, D});
        auto expected = loopAttention(q, k, v, window, cap);
        AttentionContext ctx;
        ctx.causal = true;
        ctx.window = window;
        ctx.softcap = cap;
        ctx.fullBias = attentionBiasBlock(nullptr, true, 0, T, 0, T, q.options(), window);
        ctx.queryBlock = 40;
        INFO("KV " << KV << ", window " << window << ", cap " << cap);
        CHECK(maxDiff(referenceAttention(q, k, v, ctx, 0.0, 0), expected) < 1e-5);
        CHECK(maxDiff(causalSkipAttention(q, k, v, ctx, 0.0, 0), expected) < 1e-5);
        CHECK(maxDiff(blockAttention(q, k, v, ctx, 0.0, 0), expected) < 1e-5);
      }
}

TEST_CASE("a model with grouped heads, gated MLP, q/k norms and sandwich norms: its block by hand", "[block-parts]") {
  ModelConfig c = test::tinyConfig("none");
  c.layers = 1;
  c.dModel = 16;
  c.heads = 4;
  c.kvHeads = 2;
  c.headDim = 6;  // heads x head_dim != d_model, as Qwen3's
  c.norm = "rms";
  c.blockNorms = "sandwich";
  c.gatedMlp = true;
  c.activation = "silu";
  c.qkNorm = true;
  c.linearBiases = false;
  c.qkvBias = true;
  c.finalNorm = false;
  c.tiedHead = false;
  c.finalSoftcap = 3.0;
  c.queryScale = 0.3;
  Transformer model(c);
  model->eval();
  torch::NoGradGuard g;
  for (auto& p : model->parameters()) p.copy_(torch::randn_like(p) * 0.5);
  auto tokens = torch::randint(0, c.vocabSize, {1, 9});
  const int64_t T = 9, H = 4, KV = 2, D = 6, F = c.ffn;
  auto& blk = *model->blocks[0]->as<TransformerBlock>();
  auto rmsNorm = [](const torch::Tensor& x, const torch::Tensor& w) {
    return x / (x.pow(2).mean(-1, true) + 1e-5).sqrt() * w;  // ModelConfig::normEps
  };
  auto x = model->tokenEmbedding->weight.index_select(0, tokens[0]);  // (T, C); scaled by sqrt(C)
  x = x * std::sqrt(16.0);
  auto h = rmsNorm(x, blk.ln1->weight);
  auto W = blk.attn->qkv->weight, bq = blk.attn->qkv->bias;
  auto q = (h.matmul(W.narrow(0, 0, H * D).t()) + bq.narrow(0, 0, H * D)).view({T, H, D});
  auto k = (h.matmul(W.narrow(0, H * D, KV * D).t()) + bq.narrow(0, H * D, KV * D)).view({T, KV, D});
  auto v = (h.matmul(W.narrow(0, (H + KV) * D, KV * D).t()) + bq.narrow(0, (H + KV) * D, KV * D)).view({T, KV, D});
  q = rmsNorm(q, blk.attn->qNorm->weight) * 0.3;
  k = rmsNorm(k, blk.attn->kNorm->weight);
  auto y = loopAttention(q.permute({1, 0, 2}).unsqueeze(0), k.permute({1, 0, 2}).unsqueeze(0),
                         v.permute({1, 0, 2}).unsqueeze(0), 0, 0)
               .to(torch::kFloat32)[0]
               .permute({1, 0, 2})
               .reshape({T, H * D});
  auto a = rmsNorm(y.matmul(blk.attn->out->weight.t()), blk.attnOutNorm->weight);
  x = x + a;
  auto m = rmsNorm(x, blk.ln2->weight);
  auto gate = m.matmul(blk.fc1->weight.narrow(0, 0, F).t()), up = m.matmul(blk.fc1->weight.narrow(0, F, F).t());
  auto mlp = (torch::silu(gate) * up).matmul(blk.fc2->weight.t());
  x = x + rmsNorm(mlp, blk.mlpOutNorm->weight);
  auto logits = torch::tanh(x.matmul(model->head->embedding.t()) / 3.0) * 3.0;  // (T, V)
  auto features = model->features(tokens)[0];
  CHECK(maxDiff(features, x) < 1e-4);
  CHECK(maxDiff(model->logits(features), logits) < 1e-4);
  auto targets = torch::randint(0, c.vocabSize, {T});
  auto nll = -torch::log_softmax(logits, -1).gather(1, targets.unsqueeze(1)).squeeze(1);
  CHECK(maxDiff(model->tokenNll(features, targets), nll) < 1e-4);
}

TEST_CASE("parameterShapes lists exactly a built model's parameters", "[block-parts]") {
  std::vector<ModelConfig> configs;
  configs.push_back(test::tinyConfig("alibi"));
  configs.push_back(test::tinyConfig("rotary"));
  ModelConfig llama = test::tinyConfig("rotary");
  llama.norm = "rms", llama.gatedMlp = true, llama.activation = "silu", llama.kvHeads = 2, llama.linearBiases = false;
  llama.tiedHead = false;
  configs.push_back(llama);
  ModelConfig qwen3 = llama;
  qwen3.headDim = 8, qwen3.qkNorm = true, qwen3.tiedHead = true, qwen3.qkvBias = true;
  configs.push_back(qwen3);
  ModelConfig gemma = llama;
  gemma.norm = "rms-one-plus", gemma.blockNorms = "sandwich", gemma.kvHeads = 1;
  configs.push_back(gemma);
  ModelConfig bloom = test::tinyConfig("alibi");
  bloom.embeddingNorm = true, bloom.finalNorm = false;
  configs.push_back(bloom);
  ModelConfig mosaicBert = test::tinyConfig("alibi");
  mosaicBert.arch = "encoder", mosaicBert.blockNorms = "post", mosaicBert.finalNorm = false;
  mosaicBert.embeddingNorm = true, mosaicBert.tokenTypes = 2, mosaicBert.head = "roberta";
  mosaicBert.gatedMlp = true, mosaicBert.fc1Bias = false;
  configs.push_back(mosaicBert);
  ModelConfig roberta = mosaicBert;
  roberta.pos = "learned", roberta.maxPositions = 20, roberta.positionOffset = 2, roberta.gatedMlp = false;
  roberta.fc1Bias.reset(), roberta.tokenTypes = 1;
  configs.push_back(roberta);
  ModelConfig headless = mosaicBert;
  headless.head = "none";
  configs.push_back(headless);
  for (const auto& c : configs) {
    Transformer model(c);
    std::map<std::string, std::vector<int64_t>> built;
    for (const auto& p : model->named_parameters(true)) built[p.key()] = p.value().sizes().vec();
    INFO(c.pretrainedPartsSummary());
    CHECK(parameterShapes(c) == built);
  }
  CHECK_THROWS(parameterShapes(test::tinyConfig("t5")));
}
