#include "run/checkpoint.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <sstream>
#include <stdexcept>

#include "run/checkpoint_file.h"
#include "run/pretrained_weights.h"
#include "run/run_directory.h"
#include "util/atomic_file.h"
#include "util/mapped_file.h"

namespace xtrap {
namespace fs = std::filesystem;
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

// The checkpoint is always checkpointPath(dir) of a run directory: run.json is beside it.
fs::path runJsonBeside(const fs::path& checkpoint) { return checkpoint.parent_path() / "run.json"; }

// Passes the generic "bad checkpoint" handler below unchanged.
struct CheckpointMismatch : std::runtime_error {
  using std::runtime_error::runtime_error;
};

std::string shapeText(c10::IntArrayRef sizes) { return fmt::format("[{}]", fmt::join(sizes, ", ")); }

// The settings that decide which tensors a model has and what it computes. init_seed only says
// how the weights a checkpoint replaces were drawn.
nlohmann::json architecture(const ModelConfig& config) {
  nlohmann::json j = config;
  j.erase("init_seed");
  return j;
}

// The model a checkpoint was written for must be the one its run.json describes (a checkpoint
// copied from another run, an edited run.json): names the first setting that differs.
void requireSameArchitecture(const std::string& saved, const ModelConfig& expected, const fs::path& file) {
  nlohmann::json mine = architecture(expected), theirs;
  try {
    theirs = architecture(nlohmann::json::parse(saved).get<ModelConfig>());
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error("bad checkpoint " + file.string() + ": unreadable model configuration (" + e.what() + ")");
  }
  for (auto it = theirs.begin(); it != theirs.end(); ++it) {
    auto other = mine.find(it.key());
    if (other == mine.end() || *other != it.value())
      throw CheckpointMismatch(fmt::format(
          "checkpoint {} does not belong to {}: {} is {} in the checkpoint, {} in run.json", file.string(),
          runJsonBeside(file).string(), it.key(), it.value().dump(), other == mine.end() ? "absent" : other->dump()));
  }
}

// Shapes before loading: Module::load replaces a tensor whatever its shape, so a checkpoint of
// another size would load silently.
std::map<std::string, std::vector<int64_t>> tensorShapes(Transformer& model) {
  std::map<std::string, std::vector<int64_t>> shapes;
  for (const auto& p : model->named_parameters(true)) shapes[p.key()] = p.value().sizes().vec();
  for (const auto& b : model->named_buffers(true)) shapes[b.key()] = b.value().sizes().vec();
  return shapes;
}
void requireSameShapes(const std::map<std::string, std::vector<int64_t>>& expected, Transformer& model,
                       const fs::path& file) {
  for (const auto& [name, loaded] : tensorShapes(model)) {
    auto it = expected.find(name);
    if (it != expected.end() && it->second != loaded)
      throw CheckpointMismatch(
          fmt::format("checkpoint {} does not belong to {}: {} is {} in the checkpoint, {} for run.json's model",
                      file.string(), runJsonBeside(file).string(), name, shapeText(loaded), shapeText(it->second)));
  }
}

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
  archive.write("model_config", bytesToTensor(nlohmann::json(model->config).dump()));
  archive.write("step", torch::tensor(state.step));
  archive.write("tokens_seen", torch::tensor(state.tokensSeen));
  archive.write("bad_steps", torch::tensor(state.badSteps));
  archive.write("sampler_state", bytesToTensor(state.samplerState));
  if (state.torchRngState.defined()) archive.write("torch_rng_state", state.torchRngState);
  if (state.cudaRngState.defined()) archive.write("cuda_rng_state", state.cudaRngState);
  // Streamed to the file, the header last: a copy of the payload in memory would double the
  // checkpoint's size in peak memory (450 MB for a 4-layer d=128 model on WikiText-103's vocabulary).
  writeFileAtomically(file, [&](std::ostream& out) {
    std::string header = checkpointHeader(0, 0);
    out.write(header.data(), std::streamsize(header.size()));
    uint64_t size = 0, checksum = kFnv1a64Basis;
    std::string failure;
    try {
      // Every byte is taken even after a failed write: LibTorch's writer treats a short write or
      // an exception from here as a broken invariant and terminates the process in its destructor.
      archive.save_to([&](const void* data, size_t n) {
        std::string_view bytes(static_cast<const char*>(data), n);
        if (failure.empty() && !out.write(bytes.data(), std::streamsize(n))) failure = std::strerror(errno);
        checksum = fnv1a64(bytes, checksum);
        size += n;
        return n;
      });
    } catch (const c10::Error& e) {
      throw std::runtime_error("cannot write checkpoint " + file.string() + ": " + firstLine(e.what()));
    }
    if (!failure.empty()) throw std::runtime_error("cannot write " + file.string() + ": " + failure);
    header = checkpointHeader(size, checksum);
    out.seekp(0);
    out.write(header.data(), std::streamsize(header.size()));
  });
}

TrainingState loadCheckpoint(const std::filesystem::path& file, Transformer& model,
                             torch::optim::Optimizer* optimizer) {
  if (!std::filesystem::exists(file)) throw std::runtime_error("checkpoint not found: " + file.string());
  // Verified before LibTorch sees a byte: a torn or foreign file fails here with a clear reason.
  // Mapped, not read: the page cache holds the file once and LibTorch reads the tensors from it.
  MappedFile mapped(file);
  std::string_view payload = unframeCheckpoint(mapped.bytes(), file.string());
  TrainingState state;
  try {
    torch::serialize::InputArchive archive;
    // every tensor straight onto the model's device
    archive.load_from(payload.data(), payload.size(), model->device());
    // A fresh tensor per entry: reading into a used one calls set_ on storage that, for an
    // archive loaded from memory, cannot be resized.
    auto entry = [&](const char* key) {
      torch::Tensor t;
      archive.read(key, t);
      return t;
    };
    // Checkpoints written before the configuration was stored get the shape check alone.
    torch::Tensor savedConfig;
    if (archive.try_read("model_config", savedConfig))
      requireSameArchitecture(tensorToBytes(toHost(savedConfig)), model->config, file);
    auto shapes = tensorShapes(model);
    torch::serialize::InputArchive modelArchive;
    archive.read("model", modelArchive);
    model->load(modelArchive);
    requireSameShapes(shapes, model, file);
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
  } catch (const CheckpointMismatch&) {
    throw;
  } catch (const c10::Error& e) {
    // The checksum held, so the archive is intact but was written for another model.
    throw std::runtime_error("checkpoint " + file.string() + " does not fit the model of " +
                             runJsonBeside(file).string() + ": " + firstLine(e.what_without_backtrace()));
  } catch (const std::runtime_error& e) {
    throw std::runtime_error("bad checkpoint " + file.string() + ": " + firstLine(e.what()));
  }
  return state;
}

Transformer loadTrainedModel(const RunInfo& run, const ExecutionContext& ctx) {
  if (!run.pretrained.empty()) {
    Transformer model = loadPretrainedModel(run.dir, run.pretrained, run.model, ctx);
    model->eval();
    return model;
  }
  Transformer model(run.model);
  model->place(ctx);
  loadCheckpoint(checkpointPath(run.dir), model, nullptr);
  model->eval();
  return model;
}
}  // namespace xtrap
