#include "run/pretrained_weights.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <functional>
#include <map>
#include <memory>
#include <set>
#include <stdexcept>
#include <vector>

#include "run/pretrained_config.h"
#include "run/safetensors_reader.h"

namespace xtrap {
namespace fs = std::filesystem;

namespace {

// Where one xtrap parameter comes from: a checkpoint tensor, and the layout change it needs.
struct Source {
  std::string name;                                      // the checkpoint's name, without any prefix
  std::function<torch::Tensor(torch::Tensor)> relayout;  // checkpoint layout -> xtrap's; empty = none
};

// BLOOM's query_key_value rows are [heads, 3, head_dim]; xtrap's qkv rows [3, heads, head_dim].
std::function<torch::Tensor(torch::Tensor)> bloomQkv(int64_t H) {
  return [H](torch::Tensor t) {
    auto rest = t.sizes().slice(1).vec();  // (C) for the weight, () for the bias
    std::vector<int64_t> perHead{H, 3, t.size(0) / (3 * H)};
    perHead.insert(perHead.end(), rest.begin(), rest.end());
    return t.reshape(perHead).transpose(0, 1).reshape(t.sizes());
  };
}

std::map<std::string, Source> nameMap(const std::string& type, const ModelConfig& c) {
  std::map<std::string, Source> m;
  auto both = [&](const std::string& ours, const std::string& theirs, bool bias) {
    m[ours + ".weight"] = {theirs + ".weight", {}};
    if (bias) m[ours + ".bias"] = {theirs + ".bias", {}};
  };
  if (type == "bloom") {
    m["token_embedding.weight"] = {"word_embeddings.weight", {}};
    both("embedding_norm", "word_embeddings_layernorm", true);
    for (int64_t l = 0; l < c.layers; ++l) {
      std::string b = fmt::format("blocks.{}.", l), h = fmt::format("h.{}.", l);
      both(b + "ln1", h + "input_layernorm", true);
      m[b + "attn.qkv.weight"] = {h + "self_attention.query_key_value.weight", bloomQkv(c.heads)};
      m[b + "attn.qkv.bias"] = {h + "self_attention.query_key_value.bias", bloomQkv(c.heads)};
      both(b + "attn.out", h + "self_attention.dense", true);
      both(b + "ln2", h + "post_attention_layernorm", true);
      both(b + "fc1", h + "mlp.dense_h_to_4h", true);
      both(b + "fc2", h + "mlp.dense_4h_to_h", true);
    }
    both("ln_final", "ln_f", true);
  } else {
    // MPT: LayerNorms without bias (xtrap's stay zero), Linears with biases only when no_bias is false.
    bool bias = c.linearBiases;
    m["token_embedding.weight"] = {"wte.weight", {}};
    for (int64_t l = 0; l < c.layers; ++l) {
      std::string b = fmt::format("blocks.{}.", l), h = fmt::format("blocks.{}.", l);
      both(b + "ln1", h + "norm_1", bias);
      both(b + "attn.qkv", h + "attn.Wqkv", bias);
      both(b + "attn.out", h + "attn.out_proj", bias);
      both(b + "ln2", h + "norm_2", bias);
      both(b + "fc1", h + "ffn.up_proj", bias);
      both(b + "fc2", h + "ffn.down_proj", bias);
    }
    both("ln_final", "norm_f", bias);
  }
  return m;
}

torch::ScalarType torchDtype(const std::string& dtype) {
  if (dtype == "F32") return torch::kFloat32;
  if (dtype == "F16") return torch::kFloat16;
  if (dtype == "BF16") return torch::kBFloat16;
  return torch::kFloat64;  // F64 only reaches here; others are refused before
}

std::string shapeText(const std::vector<int64_t>& s) { return fmt::format("[{}]", fmt::join(s, ", ")); }

// Restores LibTorch's default floating type when the model is built.
class DefaultDtypeGuard {
 public:
  explicit DefaultDtypeGuard(torch::ScalarType dtype) : previous_(c10::get_default_dtype()) {
    c10::set_default_dtype(c10::scalarTypeToTypeMeta(dtype));
  }
  ~DefaultDtypeGuard() { c10::set_default_dtype(previous_); }
  DefaultDtypeGuard(const DefaultDtypeGuard&) = delete;
  DefaultDtypeGuard& operator=(const DefaultDtypeGuard&) = delete;

 private:
  caffe2::TypeMeta previous_;
};

using TensorIndex = std::map<std::string, std::pair<const SafetensorsFile*, const SafetensorsTensor*>>;

}  // namespace

Transformer loadPretrainedModel(const fs::path& dir, const std::string& type, const ModelConfig& c,
                                const ExecutionContext& ctx) {
  std::vector<std::unique_ptr<SafetensorsFile>> files;
  TensorIndex tensors;  // checkpoint name without the "transformer." prefix -> (file, tensor)
  for (const auto& path : pretrainedWeightFiles(dir)) {
    if (!fs::exists(path)) throw std::runtime_error("missing weight file " + path.string());
    files.push_back(std::make_unique<SafetensorsFile>(path));
    for (const auto& [name, t] : files.back()->tensors()) {
      std::string key = name.rfind("transformer.", 0) == 0 ? name.substr(12) : name;
      auto [it, fresh] = tensors.emplace(key, std::make_pair(files.back().get(), &t));
      if (!fresh)
        throw std::runtime_error(
            fmt::format("tensor {} is in both {} and {}", name, it->second.first->path().string(), path.string()));
    }
  }
  fs::path config = dir / "config.json";
  std::map<std::string, Source> map = nameMap(type, c);
  // The matrices in bf16 when the evaluation computes in bf16 and the checkpoint holds none in
  // float32 (see the header). Built in that type: a float32 model first would be the 4N bytes
  // this avoids, at the peak.
  bool twoByte = ctx.dtype == torch::kBFloat16;
  for (const auto& [ours, source] : map) {
    auto found = tensors.find(source.name);
    if (found != tensors.end() && found->second.second->shape.size() >= 2 && found->second.second->dtype == "F32")
      twoByte = false;
  }
  Transformer model{nullptr};
  {
    DefaultDtypeGuard building(twoByte ? torch::kBFloat16 : torch::kFloat32);
    model = Transformer(c);
  }
  torch::NoGradGuard noGrad;
  for (auto& p : model->parameters(true))
    if (p.dim() < 2) p.set_data(p.to(torch::kFloat32));
  model->place(ctx);

  std::set<std::string> used{"lm_head.weight"};  // the output is tied: a stored copy is not read
  for (auto& item : model->named_parameters(true)) {
    torch::Tensor param = item.value();
    auto it = map.find(item.key());
    if (it == map.end()) {
      // Only MPT's LayerNorm biases have no source: zero, as MPT's LayerNorms have none.
      if (type == "mpt" && item.key().size() > 5 && item.key().substr(item.key().size() - 5) == ".bias" &&
          param.dim() == 1 && param.size(0) == c.dModel) {
        param.zero_();
        continue;
      }
      throw std::logic_error("pretrained weights: no source for " + item.key());
    }
    const Source& source = it->second;
    auto found = tensors.find(source.name);
    if (found == tensors.end())
      throw std::runtime_error(
          fmt::format("{} has no tensor {} (which {} implies)", dir.string(), source.name, config.string()));
    used.insert(source.name);
    const auto& [file, t] = found->second;
    if (t->dtype != "F32" && t->dtype != "F16" && t->dtype != "BF16")
      throw std::runtime_error(fmt::format("{}: tensor {} is {}; xtrap reads F32, F16 and BF16", file->path().string(),
                                           source.name, t->dtype));
    if (t->shape != param.sizes().vec())
      throw std::runtime_error(fmt::format("{}: tensor {} has shape {}, {} implies {}", file->path().string(),
                                           source.name, shapeText(t->shape), config.string(),
                                           shapeText(param.sizes().vec())));
    auto dtype = torchDtype(t->dtype);
    if (param.is_cpu() && param.scalar_type() == dtype && !source.relayout && param.is_contiguous()) {
      file->read(*t, param.data_ptr());  // straight into the parameter
      continue;
    }
    // Otherwise through one host tensor of the stored type, freed before the next.
    torch::Tensor stored = torch::empty(t->shape, torch::TensorOptions(dtype));
    file->read(*t, stored.data_ptr());
    if (source.relayout) stored = source.relayout(stored);
    param.copy_(stored);
  }
  for (const auto& [name, where] : tensors)
    if (!used.count(name))
      throw std::runtime_error(
          fmt::format("{} does not match {}: it holds {}, which the model {} describes does not have", config.string(),
                      where.first->path().string(), name, config.string()));
  return model;
}

}  // namespace xtrap
