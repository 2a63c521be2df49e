#pragma once
// Attention dump: post-softmax attention of a trained run or a pretrained model on one N-token
// window, streamed into HDF5 block of query rows by block of query rows (memory O(N * block), not
// O(N^2)), through the same attention code as training and evaluation (an AttentionObserver).
// Layout in docs/probes.md.
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "attention_plot.h"
#include "data/token_span.h"
#include "model/interpolation.h"
#include "model/transformer.h"
#include "util/hdf5_writer.h"

namespace xtrap {

struct RunInfo;

// The token ids a window is cut from and the text of each id: a word-level run's split of its
// training data, or the text a pretrained model reads (eval/pretrained_text.h).
struct ProbeText {
  TokenSpan stream;
  // A pretrained encoder's window frame, as its evaluation wraps every window ([CLS] ... [SEP]).
  std::vector<int32_t> before, after;
  std::function<std::string(int32_t)> tokenText;
  std::string source;                 // the `split` attribute: the split's name, or the --text file
  std::shared_ptr<const void> owner;  // keeps `stream`'s ids alive
};

struct Corpus;
// A word-level corpus's split.
ProbeText corpusProbeText(std::shared_ptr<const Corpus> corpus, const std::string& split);
// A word-level run's `split` of its training data (textFile and dataDir must be empty: a one-line
// error names the options otherwise), or a pretrained model's textFile, else dataDir's split.
ProbeText loadProbeText(const RunInfo& run, const std::string& textFile, const std::string& dataDir,
                        const std::string& split);

struct AttentionDumpRequest {
  std::filesystem::path out;
  int64_t Lvalid = 512;
  int64_t offset = 0;  // first token of the window in the text
  std::string split = "valid";
  std::vector<int64_t> layers;  // empty = all
  std::vector<int64_t> heads;   // empty = all (maps only; stats cover every head)
  Interp interp = Interp::None;
  NtkHeads ntkHeads = NtkHeads::All;
  double scale = 0;  // 0 = Lvalid / L_train
  // Context extension (model/context_extension.h): the maps show its mask and far positions.
  std::string extend = "none";
  ExtensionSettings extensionSettings;
  StoredFloat dtype = StoredFloat::Float16;
  bool statsOnly = false;
  bool withBias = false;
  int64_t queryBlock = 256;
};

void dumpAttention(const RunInfo& run, Transformer& model, const ProbeText& text, const AttentionDumpRequest& req);

// The same window through the same observer path, pooled for pictures: the selected layers x
// heads (all when empty) as at most maxCells x maxCells mean-attention maps, plus the mean
// attention distance per query. Memory O(N * queryBlock + maxCells^2) per head, never N x N.
RunPicture attentionPicture(const RunInfo& run, Transformer& model, const ProbeText& text,
                            const AttentionDumpRequest& req, int64_t maxCells = 256);

}  // namespace xtrap
