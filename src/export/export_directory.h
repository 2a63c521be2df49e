#pragma once
// What both exports (export_run.h, hf_export.h) share: the run's words in id order, tensors as a
// safetensors file, and an output directory that is either complete or absent.
#include <torch/torch.h>

#include <filesystem>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "run/run_directory.h"

namespace xtrap {

// The run's vocabulary in id order: its data directory's words, then <mask> and <bos> where the
// model uses them. One-line errors: a pretrained directory, a vocabulary of another size.
std::vector<std::string> runWords(const RunInfo& run, const std::filesystem::path& runDir);

// Writes (name, tensor) pairs in order as float32/float64/int/bool safetensors, host copies of
// each; the metadata says the format and xtrap's version.
void writeTensorFile(const std::filesystem::path& file,
                     const std::vector<std::pair<std::string, torch::Tensor>>& tensors);

// A one-line error when outDir exists and is not an empty directory (checked before any work).
void requireExportTarget(const std::filesystem::path& outDir);

// Calls write(tmp) on a fresh temporary sibling of outDir and renames it to outDir, so that outDir
// is either complete or absent (a killed export leaves a stale temporary, removed by the next).
// requireExportTarget first.
void writeDirectoryAtomically(const std::filesystem::path& outDir,
                              const std::function<void(const std::filesystem::path& tmp)>& write);

}  // namespace xtrap
