#include "eval/eval_report.h"

#include <fmt/format.h>

#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>

#include "util/atomic_file.h"

namespace xtrap {

std::string formatEvalTable(const std::vector<EvalRow>& rows) {
  std::string out = fmt::format(
      "{:<28} {:<14} {:>6} {:>7} {:<10} {:>6} {:<11} {:>6} {:>9} {:>8} {:>10} {:>8} {:>9} {:>7} {:>8}\n", "run", "pos",
      "L", "Lvalid", "mode", "stride", "interp", "a", "tokens", "nll", "ppl", "sec", "tok/s", "GFLOP/s", "peak MiB");
  for (const auto& r : rows)
    out += fmt::format(
        "{:<28} {:<14} {:>6} {:>7} {:<10} {:>6} {:<11} {:>6.3g} {:>9} {:>8.4f} {:>10.2f} {:>8.1f} {:>9.0f} {:>7.1f} "
        "{:>8}\n",
        r.run.substr(0, 28), r.pos, r.Ltrain, r.Lvalid, r.mode, r.stride, r.interp, r.scale, r.tokensScored, r.nll,
        r.ppl, r.seconds, r.tokensPerSecond, r.flopsPerSecond / 1e9,
        r.peakMemoryMiB >= 0 ? fmt::format("{:.0f}", r.peakMemoryMiB) : std::string("-"));
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
                      {"peak_mib", r.peakMemoryMiB}});
    writeTextAtomically(file, list.dump(2) + "\n");
    return;
  }
  if (ext != ".csv") throw std::invalid_argument("--out must end in .csv or .json: " + file.string());
  std::string csv =
      "run,arch,pos,L_train,Lvalid,split,mode,stride,interp,scale,slopes,tokens_scored,nll,ppl,seconds,tokens_per_s,"
      "flop_per_s,device,dtype,seed,peak_mib\n";
  for (const auto& r : rows)
    csv += fmt::format("{},{},{},{},{},{},{},{},{},{},\"{}\",{},{:.6f},{:.4f},{:.3f},{:.1f},{:.4g},{},{},{},{}\n",
                       r.run, r.arch, r.pos, r.Ltrain, r.Lvalid, r.split, r.mode, r.stride, r.interp, r.scale, r.slopes,
                       r.tokensScored, r.nll, r.ppl, r.seconds, r.tokensPerSecond, r.flopsPerSecond, r.device, r.dtype,
                       r.seed, r.peakMemoryMiB >= 0 ? fmt::format("{:.1f}", r.peakMemoryMiB) : std::string());
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
