#include "scenario/run_identity.h"

#include <fmt/format.h>

#include <stdexcept>

#include "run/checkpoint_file.h"

namespace xtrap {
namespace fs = std::filesystem;

nlohmann::json runIdentity(const ModelConfig& m, const TrainConfig& t) {
  if (t.device == "auto") throw std::logic_error("runIdentity: resolve the device (auto) first");
  nlohmann::json j = {{"model", m}, {"train", t}};
  j["model"].erase("vocab_size");
  j["train"].erase("threads");
  if (t.device == "cpu") j["train"].erase("device");
  if (t.dtype == "float32") j["train"].erase("dtype");
  fs::path data = fs::path(t.dataDir).lexically_normal();
  if (data.filename().empty()) data = data.parent_path();
  j["train"]["data"] = data.filename().string();
  return j;
}

fs::path variantRunDir(const fs::path& runsRoot, const ScenarioVariant& v) {
  uint64_t h = fnv1a64(runIdentity(v.model, v.train).dump()) & 0xffffffffffffull;
  return runsRoot / fmt::format("{}-{}-L{}-{:012x}", v.model.arch, v.model.pos, v.model.contextLength, h);
}

}  // namespace xtrap
