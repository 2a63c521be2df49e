#pragma once
// `xtrap eval` as a library call: for every run x interpolation x Lvalid x mode, one scoring pass
// of the split gives one EvalRow (and optionally NLL by position inside the window).
#include <filesystem>
#include <string>
#include <vector>

#include "eval/eval_report.h"
#include "model/attention_plan.h"
#include "model/context_extension.h"
#include "model/interpolation.h"

namespace xtrap {

struct EvalRequest {
  std::vector<std::filesystem::path> runs;
  std::vector<int64_t> lvalids;
  std::string split = "valid";
  std::string dataDir;  // empty = the run's training data
  // Pretrained models (run/pretrained_config.h): a UTF-8 text file scored instead of --data's split,
  // tokenized by the model's tokenizer.json (with --data, the split's file is).
  std::string textFile;
  std::vector<std::string> modes{"nonoverlap"};  // nonoverlap | sliding | pll (encoders), protocol xtrap
  // The windows (eval/window_protocol.h): xtrap (the modes above) | llama.cpp | lm-eval | strided;
  // the others are decoders' and give one row a length, its mode the protocol's name ("strided+bos").
  std::string protocol = "xtrap";
  bool windowBos = false;   // strided: the context token before every window (YaRN's add_start_token)
  int64_t trainLength = 0;  // pretrained models: L_train (run/run_directory.h); 0 = config's
  int64_t stride = 0;       // sliding / strided stride; 0 = L_train / 2
  std::vector<Interp> interps{Interp::None};
  double scale = 0;  // linear / ntk: fixed a; 0 = largest Lvalid / L_train (at least 1)
  // linear / ntk / yarn: a = Lvalid / L_train for each row (the NTK-ALiBi authors' protocol)
  // instead of one a for the sweep; rows say "linear/per-length".
  bool scalePerLength = false;
  double a0 = 1.0;                    // dynamic-ntk
  NtkHeads ntkHeads = NtkHeads::All;  // ntk / dynamic-ntk of ALiBi-family slopes
  // Context extension (model/context_extension.h): one pass per (interpolation, extension); the
  // settings resolve against L_train (0 = each method's default).
  std::vector<std::string> extensions{"none"};
  ExtensionSettings extensionSettings;
  int64_t maxTokens = 0;  // > 0: score only the first maxTokens tokens of the split
  // Not empty: every row of a decoder is compared with this base (eval/kl_divergence.h), scored
  // on the same windows (retrieval: the teacher-forced answer tokens of the same prompts): an
  // interpolation's name (the same run under it, with the sweep's factor) or another run or
  // pretrained directory with the same tokenizer (as it is). One process.
  std::string klBase;
  int64_t batch = 8;
  int64_t queryBlock = 256;
  int64_t positionBuckets = 0;  // > 0: fill `positionRows`
  int64_t threads = 0;
  std::string device = "auto";    // auto | cpu | cuda (util/execution_context.h)
  std::string dtype = "float32";  // float32 | bfloat16 (autocast)
  bool progress = true;
  bool verbose = false;  // print the slopes / rotary settings used
  // Retrieval (eval/retrieval_score.h): task passkey | kv-lines scores prompts instead of the
  // split; one row per (Lvalid, depth). The split is then only the natural filler's text.
  std::string task = "perplexity";
  std::vector<double> depths;  // percent of the prompt, each in [0, 100]
  int64_t trials = 50;         // prompts per (Lvalid, depth) cell
  std::string filler = "repeat";
  uint64_t promptSeed = 1;  // prompts are a function of (promptSeed, Lvalid, depth, trial)
  // words: xtrap's prompts (data/retrieval_prompt.h); native: Landmark's and LongEval's text for
  // pretrained models (data/native_prompt.h), scored by generation.
  std::string format = "words";
  // teacher: teacher-forced answer tokens (rows' mode "prompt"); generate: greedy generation with a
  // KV cache (eval/greedy_generation.h), scored as the format's authors score it (mode "generate"
  // for words, "native" for native prompts).
  std::string score = "teacher";
  int64_t maxNewTokens = 0;  // generate: 0 = the answer's tokens (words), 10 (Landmark), 15 (LongEval)
  bool generates() const { return score == "generate" || format == "native"; }
  // Whether a text is scored or drawn from: perplexity, and words-format retrieval with natural
  // filler (a pretrained model then needs --text or --data; other retrieval builds its prompts alone).
  bool readsText() const { return !retrieval() || (format == "words" && filler == "natural"); }
  // eval --log-samples: evaluateRuns' `samples` gets one JSON object per retrieval trial (the
  // first logTrials of each cell; 0 = all) and per document of each perplexity pass.
  bool logSamples = false;
  int64_t logTrials = 0;
  bool retrieval() const { return task != "perplexity"; }
};

struct PositionLossRow {
  std::string run, mode, interp, extend;
  std::string protocol;  // its row's protocol name (window_protocol.h)
  int64_t Lvalid = 0, bucket = 0, positionBegin = 0, positionEnd = 0, tokens = 0;
  double meanNll = 0;
  // Compared rows (EvalRequest::klBase): the bucket's mean KL(base || model) and same-top fraction.
  bool compared = false;
  double meanKl = 0, sameTop = 0;
};

// `samples` (request.logSamples): JSON lines, in the order the rows are scored (docs/retrieval.md,
// "Samples").
std::vector<EvalRow> evaluateRuns(const EvalRequest& request, std::vector<PositionLossRow>* positionRows = nullptr,
                                  std::vector<std::string>* samples = nullptr);

// What an out-of-memory error of a scoring pass tells the user to change: fewer windows a forward
// first; at one window the attention's own knobs (query blocks, and bfloat16 where the pass is in
// float32). Attention whose memory is O(Lvalid) whatever the query block (the fused kernel; SDPA
// without a bias tensor) leaves a shorter Lvalid.
std::string outOfMemoryRemedy(const EvalRequest& request, bool lowPrecision, AttentionPath path, BiasKind bias);

void writePositionRows(const std::filesystem::path& file, const std::vector<PositionLossRow>& rows);

}  // namespace xtrap
