#include "scenario/run_identity.h"

#include <fmt/format.h>

#include <stdexcept>

namespace xtrap {
namespace fs = std::filesystem;

nlohmann::json pretrainedIdentity(const ScenarioVariant& v) {
  if (v.train.device == "auto") throw std::logic_error("pretrainedIdentity: resolve the device (auto) first");
  nlohmann::json j = {{"pretrained", {{"model_type", v.pretrainedType}, {"weights", v.weightsDigest}}},
                      {"data", directoryName(v.train.dataDir)}};
  if (v.train.device != "cpu") j["device"] = v.train.device;
  if (v.train.dtype != "float32") j["dtype"] = v.train.dtype;
  if (v.trainLength > 0) j["train_length"] = v.trainLength;
  return j;
}

fs::path variantRunDir(const fs::path& runsRoot, const ScenarioVariant& v) {
  if (v.pretrained()) {
    return runsRoot / fmt::format("pretrained-{}-{}-{}", v.pretrainedType, directoryName(v.pretrainedDir),
                                  identityHash(pretrainedIdentity(v)));
  }
  if (v.adapted() && !v.train.adapted()) throw std::logic_error("variantRunDir: link the init sources first");
  return runsRoot / fmt::format("{}-{}-L{}-{}", v.model.arch, v.model.pos, v.model.contextLength,
                                runIdentityHash(v.model, v.train));
}

}  // namespace xtrap
