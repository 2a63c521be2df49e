#include "run/pretrained_weights.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>
#include <memory>
#include <set>
#include <stdexcept>
#include <vector>

#include "model/parameter_shapes.h"
#include "run/pretrained_config.h"
#include "run/pretrained_family.h"
#include "run/safetensors_reader.h"

namespace xtrap {
namespace fs = std::filesystem;

namespace {

// BLOOM's query_key_value rows are [heads, 3, head_dim]; xtrap's qkv rows [3, heads, head_dim].
torch::Tensor headsThenQkv(const torch::Tensor& t, int64_t H) {
  auto rest = t.sizes().slice(1).vec();  // (C) for the weight, () for the bias
  std::vector<int64_t> perHead{H, 3, t.size(0) / (3 * H)};
  perHead.insert(perHead.end(), rest.begin(), rest.end());
  return t.reshape(perHead).transpose(0, 1).reshape(t.sizes());
}

torch::ScalarType torchDtype(const std::string& dtype) {
  if (dtype == "F32") return torch::kFloat32;
  if (dtype == "F16") return torch::kFloat16;
  return torch::kBFloat16;  // the only other dtype checkSources lets through
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

struct Located {
  const SafetensorsFile* file;
  const SafetensorsTensor* tensor;
};
using TensorIndex = std::map<std::string, Located>;  // checkpoint name without the family's prefix

// Every tensor of the directory's weight files by its name without the family's prefix.
TensorIndex indexTensors(const std::vector<std::unique_ptr<SafetensorsFile>>& files, const PretrainedFamily& family) {
  TensorIndex tensors;
  for (const auto& file : files)
    for (const auto& [name, t] : file->tensors()) {
      std::string key = name;
      for (const auto& prefix : family.tensorPrefixes)
        if (key.rfind(prefix, 0) == 0) key = key.substr(prefix.size());
      auto [it, fresh] = tensors.emplace(key, Located{file.get(), &t});
      if (!fresh)
        throw std::runtime_error(fmt::format("tensor {} is in both {} and {}", name, it->second.file->path().string(),
                                             file->path().string()));
    }
  return tensors;
}

// A tensor saved under several names (TensorSource::alsoSavedAs): the source reads the first name
// present; the others are copies, used. Returns the copies.
std::set<std::string> pickSavedNames(TensorMap& map, const TensorIndex& tensors) {
  std::set<std::string> copies;
  for (auto& [param, source] : map) {
    if (source.alsoSavedAs.empty()) continue;
    std::vector<std::string> names{source.names.front()};
    names.insert(names.end(), source.alsoSavedAs.begin(), source.alsoSavedAs.end());
    auto first = std::find_if(names.begin(), names.end(), [&](const std::string& n) { return tensors.count(n) > 0; });
    if (first == names.end()) continue;  // checkSources names the missing tensor
    source.names = {*first};
    for (const auto& n : names)
      if (n != *first) copies.insert(n);
  }
  return copies;
}

// Checks, from the headers alone, that the sources of every parameter exist with a dtype xtrap
// reads and the shape `shapes` gives it (each source its rows, the same trailing sizes), and that
// every tensor is used (or one the family does not read), before any parameter is allocated.
// Returns whether every matrix is 2-byte.
bool checkSources(const fs::path& dir, const TensorMap& map, const std::map<std::string, std::vector<int64_t>>& shapes,
                  const TensorIndex& tensors, bool tiedHead, const PretrainedFamily& family,
                  const std::set<std::string>& copies) {
  std::string config = (dir / "config.json").string();
  for (const auto& [name, shape] : shapes)
    if (!map.count(name)) throw std::logic_error("pretrained weights: no source for " + name);
  for (const auto& [name, source] : map)
    if (!shapes.count(name)) throw std::logic_error("pretrained weights: the model has no parameter " + name);
  std::set<std::string> used = copies;
  // A tied head's stored copy is not read: transformers ties it to the embedding as well.
  if (tiedHead) used.insert("lm_head.weight");
  bool twoByte = true;
  for (const auto& [param, source] : map) {
    const std::vector<int64_t>& shape = shapes.at(param);
    for (size_t i = 0; i < source.names.size(); ++i) {
      const std::string& name = source.names[i];
      auto found = tensors.find(name);
      if (found == tensors.end())
        throw std::runtime_error(fmt::format("{} has no tensor {} (which {} implies)", dir.string(), name, config));
      used.insert(name);
      const auto& [file, t] = found->second;
      if (t->dtype != "F32" && t->dtype != "F16" && t->dtype != "BF16")
        throw std::runtime_error(
            fmt::format("{}: tensor {} is {}; xtrap reads F32, F16 and BF16", file->path().string(), name, t->dtype));
      std::vector<int64_t> want = shape;
      if (!source.rows.empty()) want[0] = source.rows[i];
      if (t->shape != want)
        throw std::runtime_error(fmt::format("{}: tensor {} has shape {}, {} implies {}", file->path().string(), name,
                                             shapeText(t->shape), config, shapeText(want)));
      if (t->shape.size() >= 2 && t->dtype == "F32") twoByte = false;
    }
  }
  for (const auto& [name, where] : tensors)
    if (!used.count(name) && !isUnreadTensor(family, name))
      throw std::runtime_error(
          fmt::format("{} does not match {}: it holds {}, which the model {} describes does not have", config,
                      where.file->path().string(), name, config));
  return twoByte;
}

}  // namespace

Transformer loadPretrainedModel(const fs::path& dir, const std::string& type, const ModelConfig& c,
                                const ExecutionContext& ctx) {
  const PretrainedFamily* family = findPretrainedFamily(type);
  if (!family) throw std::logic_error("pretrained weights: no family reads model_type " + type);
  std::vector<std::unique_ptr<SafetensorsFile>> files;
  for (const auto& path : pretrainedWeightFiles(dir)) {
    if (!fs::exists(path)) throw std::runtime_error("missing weight file " + path.string());
    files.push_back(std::make_unique<SafetensorsFile>(path));
  }
  TensorIndex tensors = indexTensors(files, *family);
  TensorMap map = family->tensors(c);
  std::set<std::string> copies = pickSavedNames(map, tensors);
  // The matrices in bf16 when the evaluation computes in bf16 and the checkpoint holds none in
  // float32 (see the header). Built in that type: a float32 model first would be the 4N bytes
  // this avoids, at the peak.
  bool twoByte =
      checkSources(dir, map, parameterShapes(c), tensors, c.tiedHead, *family, copies) && ctx.dtype == torch::kBFloat16;
  Transformer model{nullptr};
  {
    DefaultDtypeGuard building(twoByte ? torch::kBFloat16 : torch::kFloat32);
    model = Transformer(c);
  }
  torch::NoGradGuard noGrad;
  for (auto& p : model->parameters(true))
    if (p.dim() < 2) p.set_data(p.to(torch::kFloat32));
  model->place(ctx);

  for (auto& item : model->named_parameters(true)) {
    torch::Tensor param = item.value();
    auto mapped = map.find(item.key());
    if (mapped == map.end()) throw std::logic_error("pretrained weights: parameterShapes() lacks " + item.key());
    const TensorSource& source = mapped->second;
    if (source.names.empty()) {
      param.zero_();
      continue;
    }
    int64_t row = 0;
    for (const auto& name : source.names) {
      const auto& [file, t] = tensors.at(name);
      torch::Tensor slice = param.narrow(0, row, t->shape[0]);  // this source's rows of the parameter
      row += t->shape[0];
      auto dtype = torchDtype(t->dtype);
      if (slice.is_cpu() && slice.scalar_type() == dtype && source.layout == TensorLayout::AsStored &&
          slice.is_contiguous()) {
        file->read(*t, slice.data_ptr());  // straight into the parameter
        continue;
      }
      // Otherwise through one host tensor of the stored type, freed before the next.
      torch::Tensor stored = torch::empty(t->shape, torch::TensorOptions(dtype));
      file->read(*t, stored.data_ptr());
      if (source.layout == TensorLayout::HeadsThenQkv) stored = headsThenQkv(stored, c.heads);
      slice.copy_(stored);
    }
  }
  return model;
}

torch::Tensor storedLayout(const torch::Tensor& parameter, TensorLayout layout, int64_t heads) {
  if (layout == TensorLayout::AsStored) return parameter;
  auto rest = parameter.sizes().slice(1).vec();
  std::vector<int64_t> qkvFirst{3, heads, parameter.size(0) / (3 * heads)};  // xtrap's [3, H, D] rows
  qkvFirst.insert(qkvFirst.end(), rest.begin(), rest.end());
  return parameter.reshape(qkvFirst).transpose(0, 1).reshape(parameter.sizes());
}

}  // namespace xtrap
