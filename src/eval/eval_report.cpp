#include "eval/eval_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>

#include "util/atomic_file.h"

namespace xtrap {

std::string interpolationDisplay(const EvalRow& r) {
  bool varies = r.interp.rfind("dynamic", 0) == 0 || r.interp.find("/per-length") != std::string::npos;
  std::string interp = r.interp == "none" || varies ? r.interp : fmt::format("{} a={:.3g}", r.interp, r.scale);
  if (r.extend == "none") return interp;
  return r.interp == "none" ? r.extend : interp + " + " + r.extend;
}

namespace {

// The printed tables' interp column: the interpolation, and the context extension after it.
std::string shownInterp(const EvalRow& r) { return r.extend == "none" ? r.interp : r.interp + " + " + r.extend; }

// The comparison's columns (eval --kl-base), when some row has one.
std::string comparisonHeader(const std::vector<const EvalRow*>& rows) {
  if (std::none_of(rows.begin(), rows.end(), [](const EvalRow* r) { return r->compared(); })) return "";
  return fmt::format(" {:<11} {:>9} {:>9} {:>9} {:>9} {:>8} {:>8}", "kl base", "KL mean", "KL p99", "KL p99.9",
                     "KL max", "same top", "ppl/base");
}

std::string comparisonCells(const EvalRow& r) {
  if (!r.compared()) return "";
  return fmt::format(" {:<11} {:>9.5f} {:>9.5f} {:>9.5f} {:>9.5f} {:>7.2f}% {:>8.4f}", r.klBase.substr(0, 11), r.klMean,
                     r.klP99, r.klP999, r.klMax, 100 * r.sameTop, r.pplRatio);
}

std::string formatPerplexityTable(const std::vector<const EvalRow*>& rows) {
  std::string out = fmt::format(
      "{:<28} {:<14} {:>6} {:>7} {:<11} {:>6} {:<11} {:>6} {:>9} {:>8} {:>10} {:>7} {:>10} {:>8} {:>9} {:>7} {:>8}",
      "run", "pos", "L", "Lvalid", "mode", "stride", "interp", "a", "tokens", "nll", "ppl", "bpb", "word ppl", "sec",
      "tok/s", "GFLOP/s", "peak MiB");
  out += comparisonHeader(rows) + "\n";
  for (const EvalRow* r : rows) {
    out += fmt::format(
        "{:<28} {:<14} {:>6} {:>7} {:<11} {:>6} {:<11} {:>6.3g} {:>9} {:>8.4f} {:>10.2f} {:>7} {:>10} {:>8.1f} "
        "{:>9.0f} "
        "{:>7.1f} {:>8}",
        r->run.substr(0, 28), r->pos, r->Ltrain, r->Lvalid, r->mode, r->stride, shownInterp(*r), r->scale,
        r->tokensScored, r->nll, r->ppl, r->textBytes > 0 ? fmt::format("{:.4f}", r->bitsPerByte) : std::string("-"),
        r->textBytes > 0 ? fmt::format("{:.2f}", r->wordPpl) : std::string("-"), r->seconds, r->tokensPerSecond,
        r->flopsPerSecond / 1e9, r->peakMemoryMiB >= 0 ? fmt::format("{:.0f}", r->peakMemoryMiB) : std::string("-"));
    out += comparisonCells(*r) + "\n";
  }
  return out;
}

std::string formatRetrievalTable(const std::vector<const EvalRow*>& rows) {
  std::string out =
      fmt::format("{:<28} {:<14} {:>6} {:>7} {:<11} {:>6} {:<17} {:<8} {:<8} {:>6} {:>6} {:>7} {:>15} {:>8} {:>8}",
                  "run", "pos", "L", "Lvalid", "interp", "a", "task", "filler", "scored", "depth", "trials", "acc",
                  "95% interval", "ans logp", "sec");
  out += comparisonHeader(rows) + "\n";
  for (const EvalRow* r : rows)
    out += fmt::format(
               "{:<28} {:<14} {:>6} {:>7} {:<11} {:>6.3g} {:<17} {:<8} {:<8} {:>5.0f}% {:>6} {:>6.1f}% {:>15} {:>8.3f} "
               "{:>8.1f}",
               r->run.substr(0, 28), r->pos, r->Ltrain, r->Lvalid, shownInterp(*r), r->scale, r->task,
               r->filler.empty() ? "-" : r->filler, r->mode == "prompt" ? "teacher" : r->mode, r->depth, r->trials,
               100 * r->accuracy, fmt::format("[{:.1f}, {:.1f}]%", 100 * r->accuracyLow, 100 * r->accuracyHigh),
               r->answerLogProb, r->seconds) +
           comparisonCells(*r) + "\n";
  return out;
}

}  // namespace

std::string formatEvalTable(const std::vector<EvalRow>& rows) {
  std::vector<const EvalRow*> perplexity, retrieval;
  for (const auto& r : rows) (r.isRetrieval() ? retrieval : perplexity).push_back(&r);
  std::string out;
  if (!perplexity.empty() || retrieval.empty()) out += formatPerplexityTable(perplexity);
  if (!perplexity.empty() && !retrieval.empty()) out += "\n";
  if (!retrieval.empty()) out += formatRetrievalTable(retrieval);
  return out;
}

void writeEvalRows(const std::filesystem::path& file, const std::vector<EvalRow>& rows) {
  auto ext = file.extension().string();
  if (ext == ".json") {
    auto list = nlohmann::json::array();
    for (const auto& r : rows)
      list.push_back({{"run", r.run},
                      {"arch", r.arch},
                      {"pos", r.pos},
                      {"L_train", r.Ltrain},
                      {"Lvalid", r.Lvalid},
                      {"split", r.split},
                      {"mode", r.mode},
                      {"stride", r.stride},
                      {"interp", r.interp},
                      {"scale", r.scale},
                      {"slopes", r.slopes},
                      {"tokens_scored", r.tokensScored},
                      {"nll", r.nll},
                      {"ppl", r.ppl},
                      {"seconds", r.seconds},
                      {"tokens_per_s", r.tokensPerSecond},
                      {"flop_per_s", r.flopsPerSecond},
                      {"device", r.device},
                      {"dtype", r.dtype},
                      {"seed", r.seed},
                      {"peak_mib", r.peakMemoryMiB},
                      {"task", r.task},
                      {"filler", r.filler},
                      {"depth", r.depth},
                      {"trials", r.trials},
                      {"correct", r.correct},
                      {"accuracy", r.accuracy},
                      {"accuracy_low", r.accuracyLow},
                      {"accuracy_high", r.accuracyHigh},
                      {"answer_logprob", r.answerLogProb},
                      {"text_bytes", r.textBytes},
                      {"text_words", r.textWords},
                      {"bits_per_byte", r.bitsPerByte},
                      {"word_ppl", r.wordPpl},
                      {"extend", r.extend},
                      {"protocol", r.protocol},
                      {"kl_base", r.klBase},
                      {"kl_mean", r.klMean},
                      {"kl_p99", r.klP99},
                      {"kl_p999", r.klP999},
                      {"kl_max", r.klMax},
                      {"same_top", r.sameTop},
                      {"ppl_ratio", r.pplRatio}});
    writeTextAtomically(file, list.dump(2) + "\n");
    return;
  }
  if (ext != ".csv") throw std::invalid_argument("--out must end in .csv or .json: " + file.string());
  std::string csv =
      "run,arch,pos,L_train,Lvalid,split,mode,stride,interp,scale,slopes,tokens_scored,nll,ppl,seconds,tokens_per_s,"
      "flop_per_s,device,dtype,seed,peak_mib,task,filler,depth,trials,correct,accuracy,accuracy_low,accuracy_high,"
      "answer_logprob,text_bytes,text_words,bits_per_byte,word_ppl,extend,protocol,kl_base,kl_mean,kl_p99,kl_p999,kl_"
      "max,"
      "same_top,ppl_ratio\n";
  for (const auto& r : rows) {
    // Retrieval columns are empty on perplexity rows (and their perplexity columns hold the
    // answers' NLL: tokens_scored answer tokens, nll their mean).
    std::string retrieval = r.isRetrieval()
                                ? fmt::format("{},{:g},{},{},{:.6f},{:.6f},{:.6f},{:.6f}", r.filler, r.depth, r.trials,
                                              r.correct, r.accuracy, r.accuracyLow, r.accuracyHigh, r.answerLogProb)
                                : std::string(",,,,,,,");
    std::string text = r.textBytes > 0
                           ? fmt::format("{},{},{:.6f},{:.4f}", r.textBytes, r.textWords, r.bitsPerByte, r.wordPpl)
                           : std::string(",,,");
    // The comparison's columns are empty without one.
    std::string compared = r.compared() ? fmt::format("{},{:.6g},{:.6g},{:.6g},{:.6g},{:.6f},{:.6f}", r.klBase,
                                                      r.klMean, r.klP99, r.klP999, r.klMax, r.sameTop, r.pplRatio)
                                        : std::string(",,,,,,");
    csv += fmt::format(
        "{},{},{},{},{},{},{},{},{},{},\"{}\",{},{:.6f},{:.4f},{:.3f},{:.1f},{:.4g},{},{},{},{},{},{},{},{},\"{}\",{}"
        "\n",
        r.run, r.arch, r.pos, r.Ltrain, r.Lvalid, r.split, r.mode, r.stride, r.interp, r.scale, r.slopes,
        r.tokensScored, r.nll, r.ppl, r.seconds, r.tokensPerSecond, r.flopsPerSecond, r.device, r.dtype, r.seed,
        r.peakMemoryMiB >= 0 ? fmt::format("{:.1f}", r.peakMemoryMiB) : std::string(), r.task, retrieval, text,
        r.extend, r.protocol, compared);
  }
  writeTextAtomically(file, csv);
}

namespace {

// One CSV line into fields; a field may be double-quoted (the slopes are), "" inside it is a quote.
std::vector<std::string> splitCsvLine(const std::string& line) {
  std::vector<std::string> fields(1);
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    char c = line[i];
    if (quoted && c == '"' && i + 1 < line.size() && line[i + 1] == '"')
      fields.back() += '"', ++i;
    else if (c == '"')
      quoted = !quoted;
    else if (c == ',' && !quoted)
      fields.emplace_back();
    else if (c != '\r')
      fields.back() += c;
  }
  return fields;
}

std::vector<EvalRow> readCsvRows(const std::filesystem::path& file) {
  std::istringstream in(readTextFile(file));
  std::string line;
  if (!std::getline(in, line)) throw std::invalid_argument(file.string() + ": empty file");
  std::map<std::string, size_t> column;
  auto header = splitCsvLine(line);
  for (size_t i = 0; i < header.size(); ++i) column[header[i]] = i;
  for (const char* required : {"run", "pos", "L_train", "Lvalid", "mode", "interp", "ppl"})
    if (!column.count(required))
      throw std::invalid_argument(
          fmt::format("{}: no column '{}' (not an xtrap results CSV)", file.string(), required));
  std::vector<EvalRow> rows;
  for (int lineNo = 2; std::getline(in, line); ++lineNo) {
    if (line.empty() || line == "\r") continue;
    auto f = splitCsvLine(line);
    if (f.size() != header.size())
      throw std::invalid_argument(
          fmt::format("{}:{}: {} fields, the header has {}", file.string(), lineNo, f.size(), header.size()));
    auto text = [&](const char* name) { return column.count(name) ? f[column[name]] : std::string(); };
    auto number = [&](const char* name) {
      std::string s = text(name);
      if (s.empty()) return 0.0;
      try {
        size_t used = 0;
        double v = std::stod(s, &used);
        if (used == s.size()) return v;
      } catch (const std::exception&) {
      }
      throw std::invalid_argument(
          fmt::format("{}:{}: column {} is not a number: '{}'", file.string(), lineNo, name, s));
    };
    EvalRow r;
    r.run = text("run"), r.arch = text("arch"), r.pos = text("pos"), r.split = text("split");
    r.mode = text("mode"), r.interp = text("interp"), r.slopes = text("slopes");
    r.Ltrain = int64_t(number("L_train")), r.Lvalid = int64_t(number("Lvalid")), r.stride = int64_t(number("stride"));
    r.scale = number("scale"), r.tokensScored = int64_t(number("tokens_scored"));
    r.nll = number("nll"), r.ppl = number("ppl"), r.seconds = number("seconds");
    r.tokensPerSecond = number("tokens_per_s"), r.flopsPerSecond = number("flop_per_s");
    if (column.count("device")) r.device = text("device");
    if (column.count("dtype")) r.dtype = text("dtype");
    if (column.count("seed")) r.seed = int64_t(number("seed"));
    if (!text("peak_mib").empty()) r.peakMemoryMiB = number("peak_mib");
    if (!text("task").empty()) r.task = text("task");  // files written before the column: perplexity
    if (!text("extend").empty()) r.extend = text("extend");
    r.protocol = text("protocol");
    if (!text("kl_base").empty()) {  // compared rows (eval --kl-base)
      r.klBase = text("kl_base"), r.klMean = number("kl_mean"), r.klP99 = number("kl_p99");
      r.klP999 = number("kl_p999"), r.klMax = number("kl_max"), r.sameTop = number("same_top");
      r.pplRatio = number("ppl_ratio");
    }
    if (r.isRetrieval()) {
      r.filler = text("filler"), r.depth = number("depth");
      r.trials = int64_t(number("trials")), r.correct = int64_t(number("correct"));
      r.accuracy = number("accuracy"), r.accuracyLow = number("accuracy_low"), r.accuracyHigh = number("accuracy_high");
      r.answerLogProb = number("answer_logprob");
    }
    if (!text("text_bytes").empty()) {  // files written before the columns: not counted
      r.textBytes = int64_t(number("text_bytes")), r.textWords = int64_t(number("text_words"));
      r.bitsPerByte = number("bits_per_byte"), r.wordPpl = number("word_ppl");
    }
    rows.push_back(r);
  }
  return rows;
}

std::vector<EvalRow> readJsonRows(const std::filesystem::path& file) {
  std::vector<EvalRow> rows;
  try {
    for (const auto& j : nlohmann::json::parse(readTextFile(file))) {
      EvalRow r;
      j.at("run").get_to(r.run);
      j.at("arch").get_to(r.arch);
      j.at("pos").get_to(r.pos);
      j.at("L_train").get_to(r.Ltrain);
      j.at("Lvalid").get_to(r.Lvalid);
      j.at("split").get_to(r.split);
      j.at("mode").get_to(r.mode);
      j.at("stride").get_to(r.stride);
      j.at("interp").get_to(r.interp);
      j.at("scale").get_to(r.scale);
      j.at("slopes").get_to(r.slopes);
      j.at("tokens_scored").get_to(r.tokensScored);
      j.at("nll").get_to(r.nll);
      j.at("ppl").get_to(r.ppl);
      j.at("seconds").get_to(r.seconds);
      j.at("tokens_per_s").get_to(r.tokensPerSecond);
      r.flopsPerSecond = j.value("flop_per_s", 0.0);
      r.device = j.value("device", r.device);  // caches written before the columns: cpu, float32
      r.dtype = j.value("dtype", r.dtype);
      r.seed = j.value("seed", r.seed);
      r.peakMemoryMiB = j.value("peak_mib", r.peakMemoryMiB);
      r.task = j.value("task", r.task);
      r.filler = j.value("filler", r.filler);
      r.depth = j.value("depth", r.depth);
      r.trials = j.value("trials", r.trials);
      r.correct = j.value("correct", r.correct);
      r.accuracy = j.value("accuracy", r.accuracy);
      r.accuracyLow = j.value("accuracy_low", r.accuracyLow);
      r.accuracyHigh = j.value("accuracy_high", r.accuracyHigh);
      r.answerLogProb = j.value("answer_logprob", r.answerLogProb);
      r.textBytes = j.value("text_bytes", r.textBytes);
      r.textWords = j.value("text_words", r.textWords);
      r.bitsPerByte = j.value("bits_per_byte", r.bitsPerByte);
      r.wordPpl = j.value("word_ppl", r.wordPpl);
      r.extend = j.value("extend", r.extend);
      r.protocol = j.value("protocol", r.protocol);
      r.klBase = j.value("kl_base", r.klBase);
      r.klMean = j.value("kl_mean", r.klMean);
      r.klP99 = j.value("kl_p99", r.klP99);
      r.klP999 = j.value("kl_p999", r.klP999);
      r.klMax = j.value("kl_max", r.klMax);
      r.sameTop = j.value("same_top", r.sameTop);
      r.pplRatio = j.value("ppl_ratio", r.pplRatio);
      rows.push_back(r);
    }
  } catch (const nlohmann::json::exception& e) {
    throw std::invalid_argument(file.string() + ": " + e.what());
  }
  return rows;
}

}  // namespace

std::vector<EvalRow> readEvalRows(const std::filesystem::path& file) {
  auto ext = file.extension().string();
  if (ext == ".json") return readJsonRows(file);
  if (ext == ".csv") return readCsvRows(file);
  throw std::invalid_argument("results file must end in .csv or .json: " + file.string());
}

}  // namespace xtrap
