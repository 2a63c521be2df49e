#include "export/export_run.h"

#include <fmt/format.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "export/export_directory.h"
#include "model/position/fire_bias.h"
#include "model/position/kerple_bias.h"
#include "run/checkpoint.h"
#include "util/atomic_file.h"
#include "util/execution_context.h"
#include "util/interrupt.h"

namespace xtrap {

namespace {

// What config.json says beyond ModelConfig: the position method's numbers after learning.
nlohmann::json positionDetails(Transformer& model) {
  nlohmann::json j;
  if (LinearBias* lb = model->linearBias()) {
    const LinearBiasSpec& spec = lb->spec();
    j["slope_past"] = toHostDoubles(lb->slopePast());  // sigmoid applied for learned slopes
    j["slope_future"] = toHostDoubles(lb->slopeFuture());
    j["block_past"] = spec.blockPast;
    j["block_future"] = spec.blockFuture;
    j["future_shift"] = spec.futureShift;
    j["learned_slopes"] = spec.learnedSlopes;
    j["first_token_bias"] =
        spec.hasFirstTokenBias ? nlohmann::json(toHostDoubles(lb->firstTokenBias())) : nlohmann::json();
  }
  if (auto* kerple = dynamic_cast<KerpleLogBias*>(model->attentionBias())) {
    j["r1"] = toHostDoubles(kerple->r1());  // bias -r1 log(1 + r2 |i-j|) per head
    j["r2"] = toHostDoubles(kerple->r2());
  }
  if (auto* fire = dynamic_cast<FireBias*>(model->attentionBias())) {
    j["c"] = toHostDoubles(fire->c())[0];  // psi(x) = log(|c| x + 1)
    j["threshold"] = toHostDoubles(fire->threshold())[0];
    j["epsilon"] = FireBias::kEpsilon;
  }
  return j;
}
// What config.json says about the computation itself, so that a reader can rebuild the model from
// it without guessing: read from the modules where they hold the choice (epsilon, biases, the
// adaptive softmax's options), stated where the code fixes it (transformer.cpp, attention.cpp).
nlohmann::json architectureDetails(Transformer& model) {
  const ModelConfig& c = model->config;
  auto& block = *model->blocks[0]->as<TransformerBlock>();
  nlohmann::json j;
  j["block"] = "pre-LayerNorm: x = x + attn(ln1(x)); x = x + fc2(activation(fc1(ln2(x))))";
  // gelu: torch::gelu, the exact form 0.5 x (1 + erf(x / sqrt(2))); gelu-tanh: its tanh
  // approximation; relu: max(x, 0).
  j["activation"] = c.activation;
  if (c.hasPretrainedParts())
    throw std::invalid_argument("export: the model uses block parts (" + c.pretrainedPartsSummary() +
                                ") the export format does not describe");
  j["layer_norm_eps"] = block.ln1->eps;
  j["layer_norm_affine"] = true;
  j["final_norm"] = static_cast<bool>(model->lnFinal);                                // ln_final before the head
  j["linear_biases"] = block.attn->qkv->options.bias() && block.fc1->options.bias();  // qkv, out, fc1, fc2
  j["qkv_packing"] = "q,k,v";  // attn.qkv.weight rows: q, then k, then v; each heads x head_dim, head-major
  j["query_scale"] = 1.0 / std::sqrt(double(c.dModel / c.heads));  // q * 1/sqrt(head_dim); position bias unscaled
  j["embedding_scale"] = c.scaleEmbedding ? std::sqrt(double(c.dModel)) : 1.0;
  if (model->adaptiveInput) {
    // Where each band's input vectors live: input = embedding[id - start] @ projection (C / 4^b -> C).
    nlohmann::json bands = nlohmann::json::array();
    auto named = model->named_parameters(true);
    auto nameOf = [&](const torch::Tensor& t) {
      for (const auto& item : named)
        if (item.value().unsafeGetTensorImpl() == t.unsafeGetTensorImpl()) return item.key();
      throw std::logic_error("export: an adaptive input tensor is not a parameter");
    };
    auto& softmax = *model->head->adaptive;
    auto sequentialAt = [&](size_t i) -> torch::nn::SequentialImpl& {
      return *softmax.tail[i]->as<torch::nn::Sequential>();
    };
    bands.push_back({{"start", 0},
                     {"end", c.adaptiveSoftmaxCutoffs[0]},
                     {"embedding", nameOf(softmax.head->weight)},
                     {"embedding_rows_from", 0},
                     {"projection", nameOf(model->adaptiveInput->shortlistProjection->weight)},
                     {"projection_transposed", true}});  // a Linear weight (C, C): input = e @ W^T
    for (size_t i = 0; i + 1 < softmax.cutoffs.size(); ++i)
      bands.push_back({{"start", softmax.cutoffs[i]},
                       {"end", softmax.cutoffs[i + 1]},
                       {"embedding", nameOf(sequentialAt(i)[1]->as<torch::nn::Linear>()->weight)},
                       {"embedding_rows_from", 0},
                       {"projection", nameOf(sequentialAt(i)[0]->as<torch::nn::Linear>()->weight)},
                       {"projection_transposed", false}});  // the tail's (C / 4^b, C): input = e @ W
    j["input"] = "adaptive input tied to the adaptive softmax: per band, embedding rows @ projection";
    j["adaptive_input"] = {{"bands", bands}};
  } else {
    j["input"] = "token_embedding rows";
  }
  if (auto& adaptive = model->head->adaptive) {
    j["output"] = model->adaptiveInput ? "adaptive softmax, its tensors shared with the adaptive input"
                                       : "adaptive softmax, untied from the token embedding";
    j["adaptive_softmax"] = {{"cutoffs", c.adaptiveSoftmaxCutoffs},
                             {"div_value", adaptive->options.div_value()},
                             {"head_bias", adaptive->options.head_bias()},
                             {"tail_biases", false},  // LibTorch's tails: Linear(d, d / 4^(i+1)) then Linear(.., size)
                             {"log_prob",
                              "head log-softmax over shortlist + one entry per cluster; a cluster's "
                              "words add its entry to the tail's log-softmax"}};
  } else if (c.headKind() == OutputHeadKind::Clap) {
    j["output"] = "beta * x . normalize(E)^T, the input embedding the same normalised rows";
  } else if (c.headKind() == OutputHeadKind::Roberta) {
    j["output"] = "layer_norm(gelu(dense(x))) . E^T + bias, E the input embedding";
  } else {
    j["output"] = "x . E^T, E the input embedding";
  }
  return j;
}
}  // namespace

void exportRun(const std::filesystem::path& runDir, const std::filesystem::path& outDir) {
  requireExportTarget(outDir);
  RunInfo run = readRunInfo(runDir);
  std::vector<std::string> words = runWords(run, runDir);
  throwIfInterrupted();
  Transformer model = loadTrainedModel(run);
  throwIfInterrupted();
  writeDirectoryAtomically(outDir, [&](const std::filesystem::path& tmp) {
    std::vector<std::pair<std::string, torch::Tensor>> tensors;
    for (const auto& item : model->named_parameters(true)) tensors.emplace_back(item.key(), item.value());
    for (const auto& item : model->named_buffers(true)) tensors.emplace_back(item.key(), item.value());
    writeTensorFile(tmp / "model.safetensors", tensors);

    nlohmann::json config;
    config["xtrap_version"] = xtrapVersion();
    config["model"] = run.model;  // every ModelConfig field (arch, sizes, pos, head, cutoffs, rotary, t5)
    config["position"] = positionDetails(model);
    config["architecture"] = architectureDetails(model);
    config["vocab_file"] = "vocab.txt";
    config["steps_trained"] = run.stepsDone;
    writeTextAtomically(tmp / "config.json", config.dump(2) + "\n");

    std::string vocab;
    for (const auto& w : words) vocab += w + "\n";
    writeTextAtomically(tmp / "vocab.txt", vocab);
  });
}

}  // namespace xtrap
