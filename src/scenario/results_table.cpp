#include "scenario/results_table.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <set>

namespace xtrap {

namespace {
// "mean" for one value; "mean ± s" (sample standard deviation) for several.
std::string meanAndSpread(const std::vector<double>& values, const char* format) {
  double mean = std::accumulate(values.begin(), values.end(), 0.0) / double(values.size());
  if (values.size() == 1) return fmt::format(format, mean);
  double squares = 0;
  for (double v : values) squares += (v - mean) * (v - mean);
  double sd = std::sqrt(squares / double(values.size() - 1));
  return fmt::format(format, mean) + " ± " + fmt::format(format, sd);
}
}  // namespace

std::string formatMarkdownTable(const std::string& title, const std::vector<EvalRow>& rows) {
  std::set<std::string> interps;
  std::set<int64_t> lengths;
  for (const auto& r : rows) interps.insert(r.interp + "|" + r.extend), lengths.insert(r.Lvalid);
  bool showInterp = interps.size() > 1;
  std::vector<std::string> labels;
  std::map<std::string, std::map<int64_t, std::map<int64_t, double>>> ppl;  // label -> seed -> Lvalid -> ppl
  size_t mostSeeds = 1;
  for (const auto& r : rows) {
    std::string shown = interpolationDisplay(r);
    std::string label = showInterp || shown != "none" ? r.run + " (" + shown + ")" : r.run;
    if (!ppl.count(label)) labels.push_back(label);
    ppl[label][r.seed][r.Lvalid] = r.ppl;
    mostSeeds = std::max(mostSeeds, ppl[label].size());
  }
  std::string out = fmt::format("### {}\n\n", title);
  if (mostSeeds > 1)
    out +=
        fmt::format("Cells: mean ± sample standard deviation over the seeds of a variant (up to {}).\n\n", mostSeeds);
  out += "| variant |";
  std::string rule = "|---|";
  for (int64_t L : lengths) out += fmt::format(" {} |", L), rule += "---:|";
  bool ratio = lengths.size() > 1;
  if (ratio) out += fmt::format(" ppl({})/ppl({}) |", *lengths.rbegin(), *lengths.begin()), rule += "---:|";
  out += "\n" + rule + "\n";
  for (const auto& label : labels) {
    const auto& bySeed = ppl[label];
    out += "| " + label + " |";
    for (int64_t L : lengths) {
      std::vector<double> cells;
      for (const auto& [seed, cellsOfSeed] : bySeed)
        if (auto it = cellsOfSeed.find(L); it != cellsOfSeed.end()) cells.push_back(it->second);
      out += cells.empty() ? " - |" : " " + meanAndSpread(cells, "{:.2f}") + " |";
    }
    if (ratio) {
      std::vector<double> ratios;  // per seed, then averaged
      for (const auto& [seed, cells] : bySeed) {
        auto first = cells.find(*lengths.begin()), last = cells.find(*lengths.rbegin());
        if (first != cells.end() && last != cells.end()) ratios.push_back(last->second / first->second);
      }
      out += ratios.empty() ? " - |" : " " + meanAndSpread(ratios, "{:.3f}") + " |";
    }
    out += "\n";
  }
  return out + "\n";
}

std::string formatRetrievalMarkdownTable(const std::string& title, const std::vector<EvalRow>& rows) {
  std::set<int64_t> lengths;
  std::vector<std::string> labels;
  struct Cell {
    int64_t correct = 0, trials = 0;
    double worst = 1;  // the lowest accuracy of a depth
  };
  std::map<std::string, std::map<int64_t, Cell>> cells;  // label -> Lvalid -> cell, every depth and seed pooled
  for (const auto& r : rows) {
    std::string shown = interpolationDisplay(r);
    std::string label = shown == "none" ? r.run : fmt::format("{} ({})", r.run, shown);
    if (!cells.count(label)) labels.push_back(label);
    lengths.insert(r.Lvalid);
    Cell& c = cells[label][r.Lvalid];
    c.correct += r.correct, c.trials += r.trials, c.worst = std::min(c.worst, r.accuracy);
  }
  std::string out = fmt::format("### {}\n\n", title);
  out += "Cells: accuracy over every depth's trials pooled, and (after /) the accuracy of the worst depth, in %.\n\n";
  out += "| variant |";
  std::string rule = "|---|";
  for (int64_t L : lengths) out += fmt::format(" {} |", L), rule += "---:|";
  out += "\n" + rule + "\n";
  for (const auto& label : labels) {
    out += "| " + label + " |";
    for (int64_t L : lengths) {
      auto it = cells[label].find(L);
      out += it == cells[label].end() || it->second.trials == 0
                 ? std::string(" - |")
                 : fmt::format(" {:.0f} / {:.0f} |", 100.0 * double(it->second.correct) / double(it->second.trials),
                               100.0 * it->second.worst);
    }
    out += "\n";
  }
  return out + "\n";
}

}  // namespace xtrap
