#pragma once
// One row per (run, Lvalid, mode, interpolation): printed as an aligned table and written as
// CSV or JSON (chosen by the output file's extension).
#include <filesystem>
#include <string>
#include <vector>

namespace xtrap {

struct EvalRow {
  std::string run;  // run directory name
  std::string arch, pos;
  int64_t Ltrain = 0, Lvalid = 0;
  std::string split = "valid";
  // nonoverlap | sliding; retrieval: prompt (teacher-forced), generate (words, generated), native
  std::string mode = "nonoverlap";
  int64_t stride = 0;
  std::string interp = "none";
  double scale = 1.0;  // interpolation factor a actually used
  // Context extension (model/context_extension.h): its label with its settings, "none" without one
  // (files written before the column).
  std::string extend = "none";
  std::string slopes;  // ALiBi slopes used (space separated), empty otherwise
  int64_t tokensScored = 0;
  double nll = 0, ppl = 0, seconds = 0, tokensPerSecond = 0;
  double flopsPerSecond = 0;  // model FLOPs (model/flops.h) per second
  // Where and in what precision it was scored (files written before these columns: cpu, float32).
  std::string device = "cpu";
  std::string dtype = "float32";
  int64_t seed = -1;  // the run's training seed (-1: a file written before the column)
  // The most GPU memory the scoring pass's tensors took (util/execution_context.h), in MiB; -1:
  // not measured (CPU rows, files written before the column). An empty CSV field.
  double peakMemoryMiB = -1;
  // Retrieval rows (eval/retrieval_score.h): one (Lvalid, depth) cell of a sweep. Perplexity rows
  // have task "perplexity" and leave these columns empty.
  std::string task = "perplexity";  // perplexity | passkey | kv-lines
  std::string filler;               // passkey: repeat | natural
  double depth = -1;                // where the needle starts, in percent of the filler (-1: none)
  int64_t trials = 0, correct = 0;
  double accuracy = 0, accuracyLow = 0, accuracyHigh = 0;  // correct / trials, its 95% Wilson interval
  // Mean log-probability (nats) of an answer token: teacher-forced, of the right tokens; generated
  // (mode generate, native), of the tokens the model chose.
  double answerLogProb = 0;
  // Perplexity rows: the text the scored tokens spell (data/text_tokens.h says how bytes and words
  // are counted), and the NLL summed over the tokens per byte (in bits) and per word, comparable
  // across tokenizers. 0 bytes: not counted (retrieval rows, files written before the columns).
  int64_t textBytes = 0, textWords = 0;
  double bitsPerByte = 0, wordPpl = 0;
  // The windows a perplexity row was scored with (eval/window_protocol.h's protocolDescription:
  // length, stride, scored part, context token, documents); empty in files written before the column.
  std::string protocol;
  // eval --kl-base (eval/kl_divergence.h): the base compared with (an interpolation's name or a
  // directory's), empty for none; KL(base || this row's model) per scored token, its mean, 99th and
  // 99.9th percentiles and maximum (nats); the fraction of tokens whose most likely next token is the
  // same under both; and this row's perplexity over the base's, on the same tokens.
  std::string klBase;
  double klMean = 0, klP99 = 0, klP999 = 0, klMax = 0, sameTop = 0, pplRatio = 0;
  bool isRetrieval() const { return task != "perplexity"; }
  bool compared() const { return !klBase.empty(); }
};

// How tables and plots name a row's interpolation: "none"; a fixed factor with its value
// ("linear a=8"); "linear/per-length" (a = Lvalid / L_train, one a a row) and dynamic-ntk /
// dynamic-yarn (a from each window) by name, their a being in the row's scale column; then its
// context extension, if any ("ntk a=8 + logn", "sinks S=4 W=124").
std::string interpolationDisplay(const EvalRow& row);

// Perplexity rows and retrieval rows print as two tables (one when only one kind is present).
std::string formatEvalTable(const std::vector<EvalRow>& rows);
// .csv or .json (a list of objects); atomically.
void writeEvalRows(const std::filesystem::path& file, const std::vector<EvalRow>& rows);
// Reads what writeEvalRows wrote (.csv by its header, so older files without the later columns
// still read; or .json). Throws a one-line error naming the file and the problem.
std::vector<EvalRow> readEvalRows(const std::filesystem::path& file);

}  // namespace xtrap
