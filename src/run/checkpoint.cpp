#include "run/checkpoint.h"

#include <cstring>
#include <sstream>
#include <stdexcept>

#include "run/checkpoint_file.h"
#include "run/run_directory.h"
#include "util/atomic_file.h"

namespace xtrap {
namespace {

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
  if (state.cudaRngState.defined()) archive.write("cuda_rng_state", state.cudaRngState);
  std::ostringstream payload;
  try {
    archive.save_to(payload);
  } catch (const c10::Error& e) {
    throw std::runtime_error("cannot write checkpoint " + file.string() + ": " + firstLine(e.what()));
  }
  std::string framed = frameCheckpoint(payload.str());
  writeFileAtomically(file, [&](std::ostream& out) { out.write(framed.data(), std::streamsize(framed.size())); });
}

TrainingState loadCheckpoint(const std::filesystem::path& file, Transformer& model,
                             torch::optim::Optimizer* optimizer) {
  if (!std::filesystem::exists(file)) throw std::runtime_error("checkpoint not found: " + file.string());
  // Verified before LibTorch sees a byte: a torn or foreign file fails here with a clear reason.
  std::string bytes = readTextFile(file);
  std::istringstream payload(std::string(unframeCheckpoint(bytes, file.string())));
  bytes.clear();
  TrainingState state;
  try {
    torch::serialize::InputArchive archive;
    archive.load_from(payload, model->device());  // every tensor straight onto the model's device
    // A fresh tensor per entry: reading into a used one calls set_ on storage that, for an
    // archive loaded from memory, cannot be resized.
    auto entry = [&](const char* key) {
      torch::Tensor t;
      archive.read(key, t);
      return t;
    };
    torch::serialize::InputArchive modelArchive;
    archive.read("model", modelArchive);
    model->load(modelArchive);
    if (optimizer) {
      torch::serialize::InputArchive optimizerArchive;
      archive.read("optimizer", optimizerArchive);
      optimizer->load(optimizerArchive);
    }
    state.step = entry("step").item<int64_t>();
    state.tokensSeen = entry("tokens_seen").item<int64_t>();
    state.badSteps = entry("bad_steps").item<int64_t>();
    state.samplerState = tensorToBytes(toHost(entry("sampler_state")));
    // Generator states are host byte tensors whatever the device.
    torch::Tensor t;
    if (archive.try_read("torch_rng_state", t)) state.torchRngState = toHost(t);
    torch::Tensor cuda;
    if (archive.try_read("cuda_rng_state", cuda)) state.cudaRngState = toHost(cuda);
  } catch (const c10::Error& e) {
    // The checksum held, so the archive is intact but was written for another model.
    throw std::runtime_error("checkpoint " + file.string() +
                             " does not fit this model: " + firstLine(e.what_without_backtrace()));
  } catch (const std::runtime_error& e) {
    throw std::runtime_error("bad checkpoint " + file.string() + ": " + firstLine(e.what()));
  }
  return state;
}

Transformer loadTrainedModel(const RunInfo& run, const ExecutionContext& ctx) {
  Transformer model(run.model);
  model->place(ctx);
  loadCheckpoint(checkpointPath(run.dir), model, nullptr);
  model->eval();
  return model;
}
}  // namespace xtrap
