#include "train/checkpoint.h"

#include <cstring>
#include <stdexcept>

#include "util/atomic_file.h"

namespace xtrap {
namespace {

constexpr int64_t kFormatVersion = 1;

torch::Tensor bytesToTensor(const std::string& s) {
  auto t = torch::empty({static_cast<int64_t>(s.size())}, torch::kUInt8);
  std::memcpy(t.data_ptr(), s.data(), s.size());
  return t;
}
std::string tensorToBytes(const torch::Tensor& t) {
  auto c = t.contiguous();
  return std::string(static_cast<const char*>(c.data_ptr()), static_cast<size_t>(c.numel()));
}
std::string firstLine(const std::string& s) { return s.substr(0, s.find('\n')); }

}  // namespace

void saveCheckpoint(const std::filesystem::path& file, Transformer& model, torch::optim::Optimizer* optimizer,
                    const TrainingState& state) {
  torch::serialize::OutputArchive archive;
  archive.write("format_version", torch::tensor(kFormatVersion));
  torch::serialize::OutputArchive modelArchive;
  model->save(modelArchive);
  archive.write("model", modelArchive);
  if (optimizer) {
    torch::serialize::OutputArchive optimizerArchive;
    optimizer->save(optimizerArchive);
    archive.write("optimizer", optimizerArchive);
  }
  archive.write("step", torch::tensor(state.step));
  archive.write("tokens_seen", torch::tensor(state.tokensSeen));
  archive.write("bad_steps", torch::tensor(state.badSteps));
  archive.write("sampler_state", bytesToTensor(state.samplerState));
  if (state.torchRngState.defined()) archive.write("torch_rng_state", state.torchRngState);
  auto tmp = temporarySibling(file);
  try {
    archive.save_to(tmp.string());
  } catch (const c10::Error& e) {
    std::filesystem::remove(tmp);
    throw std::runtime_error("cannot write checkpoint " + file.string() + ": " + firstLine(e.what()));
  }
  commitTemporary(tmp, file);
}

TrainingState loadCheckpoint(const std::filesystem::path& file, Transformer& model,
                             torch::optim::Optimizer* optimizer) {
  if (!std::filesystem::exists(file)) throw std::runtime_error("checkpoint not found: " + file.string());
  TrainingState state;
  try {
    torch::serialize::InputArchive archive;
    archive.load_from(file.string());
    // A fresh tensor per entry: reading into a tensor that already holds a loaded entry makes
    // LibTorch set_() its storage, which fails ("Trying to resize storage that is not resizable").
    auto read = [&](const char* key) {
      torch::Tensor v;
      archive.read(key, v);
      return v;
    };
    torch::Tensor t = read("format_version");
    if (t.item<int64_t>() != kFormatVersion)
      throw std::runtime_error("unsupported checkpoint format version " + std::to_string(t.item<int64_t>()));
    torch::serialize::InputArchive modelArchive;
    archive.read("model", modelArchive);
    model->load(modelArchive);
    if (optimizer) {
      torch::serialize::InputArchive optimizerArchive;
      archive.read("optimizer", optimizerArchive);
      optimizer->load(optimizerArchive);
    }
    t = read("step");
    state.step = t.item<int64_t>();
    t = read("tokens_seen");
    state.tokensSeen = t.item<int64_t>();
    t = read("bad_steps");
    state.badSteps = t.item<int64_t>();
    t = read("sampler_state");
    state.samplerState = tensorToBytes(t);
    torch::Tensor rng;
    if (archive.try_read("torch_rng_state", rng)) state.torchRngState = rng;
  } catch (const c10::Error& e) {
    throw std::runtime_error("corrupt or foreign checkpoint " + file.string() + ": " +
                             firstLine(e.what_without_backtrace()));
  } catch (const std::runtime_error& e) {
    throw std::runtime_error("bad checkpoint " + file.string() + ": " + firstLine(e.what()));
  }
  return state;
}

}  // namespace xtrap

#include "train/run_directory.h"

namespace xtrap {
Transformer loadTrainedModel(const RunInfo& run) {
  Transformer model(run.model);
  loadCheckpoint(checkpointPath(run.dir), model, nullptr);
  model->eval();
  return model;
}
}  // namespace xtrap
