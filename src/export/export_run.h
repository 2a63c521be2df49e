#pragma once
// `xtrap export RUN OUT`: a trained run as files any Python user can load without xtrap:
//   OUT/model.safetensors  every LibTorch parameter and buffer under its LibTorch name
//   OUT/config.json        ModelConfig, position-method details (slopes after learning), version
//   OUT/vocab.txt          one word per line in id order (specials such as <mask> included)
// OUT is written as a temporary sibling directory and renamed, so it is either complete or absent.
#include <filesystem>

namespace xtrap {

// Throws a one-line error for a bad RUN, an existing non-empty OUT or a vocabulary mismatch.
void exportRun(const std::filesystem::path& runDir, const std::filesystem::path& outDir);

}  // namespace xtrap
