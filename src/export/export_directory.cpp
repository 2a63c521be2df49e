#include "export/export_directory.h"

#include <fmt/format.h>

#include "data/wikitext.h"
#include "export/safetensors_writer.h"
#include "util/atomic_file.h"
#include "util/execution_context.h"
#include "util/interrupt.h"

namespace xtrap {

namespace {
std::string safetensorsDtype(torch::ScalarType t) {
  switch (t) {
    case torch::kFloat32:
      return "F32";
    case torch::kFloat64:
      return "F64";
    case torch::kInt64:
      return "I64";
    case torch::kInt32:
      return "I32";
    case torch::kBool:
      return "BOOL";
    default:
      throw std::runtime_error(std::string("export: unsupported tensor type ") + c10::toString(t));
  }
}
}  // namespace

std::vector<std::string> runWords(const RunInfo& run, const std::filesystem::path& runDir) {
  if (!run.pretrained.empty())
    throw std::invalid_argument("export: " + runDir.string() +
                                " is a Hugging Face model directory: its weights are already safetensors");
  if (!run.tokenizerFamily.empty())
    throw std::invalid_argument("export: " + runDir.string() + " was trained from a " + run.tokenizerFamily +
                                " directory and reads its text through tokenizer.json, not WikiText's words: export "
                                "it with --hf DIR (as " +
                                run.tokenizerFamily + ")");
  Corpus corpus = loadWikiText(run.train.dataDir);
  std::vector<std::string> words = corpus.vocab.words();
  if (!run.model.causal()) words.emplace_back(Vocabulary::kMask);  // the masked-LM trainer's layout:
  if (run.model.usesBos()) words.emplace_back(Vocabulary::kBos);   // words, <mask>, then <bos>
  if (static_cast<int64_t>(words.size()) != run.model.vocabSize)
    throw std::runtime_error(fmt::format("export: run {} was trained with {} words, {} gives {}", runDir.string(),
                                         run.model.vocabSize, run.train.dataDir, words.size()));
  return words;
}

void writeTensorFile(const std::filesystem::path& file,
                     const std::vector<std::pair<std::string, torch::Tensor>>& tensors) {
  std::vector<torch::Tensor> keep;  // owns the contiguous host copies the entries point into
  std::vector<SafetensorsEntry> entries;
  for (const auto& [name, tensor] : tensors) {
    keep.push_back(toHost(tensor));
    const torch::Tensor& t = keep.back();
    entries.push_back({name, safetensorsDtype(t.scalar_type()), t.sizes().vec(), t.data_ptr(), size_t(t.nbytes())});
  }
  writeFileAtomically(file, [&](std::ostream& out) {
    writeSafetensors(out, entries, {{"format", "pt"}, {"xtrap_version", xtrapVersion()}});
  });
}

void requireExportTarget(const std::filesystem::path& outDir) {
  namespace fs = std::filesystem;
  if (fs::exists(outDir) && !(fs::is_directory(outDir) && fs::is_empty(outDir)))
    throw std::runtime_error("export: " + outDir.string() + " exists and is not an empty directory");
}

void writeDirectoryAtomically(const std::filesystem::path& outDir,
                              const std::function<void(const std::filesystem::path& tmp)>& write) {
  namespace fs = std::filesystem;
  requireExportTarget(outDir);
  fs::path target = fs::absolute(outDir).lexically_normal();
  if (target.filename().empty()) target = target.parent_path();
  removeStaleTemporariesOf(target);  // OUT.tmp.PID/ of an export killed before its rename
  fs::path tmp = temporarySibling(target);
  fs::create_directories(tmp);
  try {
    write(tmp);
    throwIfInterrupted();                        // the last moment a signal can stop the export without a trace
    if (fs::exists(target)) fs::remove(target);  // empty (checked above)
    fs::rename(tmp, target);
  } catch (...) {
    std::error_code ec;
    fs::remove_all(tmp, ec);
    throw;
  }
}

}  // namespace xtrap
