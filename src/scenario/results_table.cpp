#include "scenario/results_table.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

namespace xtrap {

std::string formatMarkdownTable(const std::string& title, const std::vector<EvalRow>& rows) {
  std::set<std::string> interps;
  std::set<int64_t> lengths;
  for (const auto& r : rows) interps.insert(r.interp), lengths.insert(r.Lvalid);
  bool showInterp = interps.size() > 1;
  std::vector<std::string> labels;
  std::map<std::string, std::map<int64_t, double>> ppl;
  for (const auto& r : rows) {
    std::string label = showInterp ? r.run + " (" + r.interp + ")" : r.run;
    if (!ppl.count(label)) labels.push_back(label);
    ppl[label][r.Lvalid] = r.ppl;
  }
  std::string out = fmt::format("### {}\n\n| variant |", title);
  std::string rule = "|---|";
  for (int64_t L : lengths) out += fmt::format(" {} |", L), rule += "---:|";
  bool ratio = lengths.size() > 1;
  if (ratio) out += fmt::format(" ppl({})/ppl({}) |", *lengths.rbegin(), *lengths.begin()), rule += "---:|";
  out += "\n" + rule + "\n";
  for (const auto& label : labels) {
    const auto& cells = ppl[label];
    out += "| " + label + " |";
    for (int64_t L : lengths) {
      auto it = cells.find(L);
      out += it == cells.end() ? " - |" : fmt::format(" {:.2f} |", it->second);
    }
    if (ratio) {
      auto first = cells.find(*lengths.begin()), last = cells.find(*lengths.rbegin());
      out +=
          first == cells.end() || last == cells.end() ? " - |" : fmt::format(" {:.3f} |", last->second / first->second);
    }
    out += "\n";
  }
  return out + "\n";
}

}  // namespace xtrap
