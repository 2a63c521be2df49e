#include "eval/retrieval_plot.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>
#include <stdexcept>

#include "util/gnuplot.h"

namespace xtrap {

namespace {

struct Panel {
  std::string run, task, filler, interp, shown;
  double scale = 1;
  int64_t Ltrain = 0;
  std::map<std::pair<int64_t, double>, double> accuracy;  // (Lvalid, depth) -> accuracy
  std::string title() const {
    std::string what = task + (filler.empty() ? "" : " (" + filler + " filler)");
    std::string how = interp == "none" ? "no interpolation" : shown;
    return fmt::format("{}: {}, {}", run, what, how);
  }
};

}  // namespace

HeatmapScript retrievalHeatmapScript(const std::vector<EvalRow>& rows, const std::string& title) {
  std::vector<Panel> panels;
  std::map<std::string, size_t> index;
  for (const auto& r : rows) {
    if (!r.isRetrieval()) continue;
    std::string key = r.run + "|" + r.task + "|" + r.filler + "|" + r.interp + "|" + r.extend;
    auto [it, fresh] = index.emplace(key, panels.size());
    if (fresh) panels.push_back({r.run, r.task, r.filler, r.interp, interpolationDisplay(r), r.scale, r.Ltrain, {}});
    panels[it->second].accuracy[{r.Lvalid, r.depth}] = r.accuracy;
  }
  if (panels.empty())
    throw std::invalid_argument("no retrieval rows to draw (evaluate with --task passkey or kv-lines)");
  HeatmapScript out;
  out.panels = panels.size();
  size_t columns = std::min<size_t>(panels.size(), 3), panelRows = (panels.size() + columns - 1) / columns;
  out.width = 60 + 520 * int(columns);
  out.height = 60 + 420 * int(panelRows);
  std::string& s = out.script;
  s += "set palette defined (0 '#b2182b', 0.5 '#f4e6c2', 1 '#2166ac')\nset cbrange [0:100]\n"
       "set cblabel 'accuracy (%)'\nset xlabel 'Lvalid (tokens)'\nset ylabel 'answer depth (% of prompt)'\n"
       "set yrange [] reverse\nunset key\nset tics nomirror out\nset border lw 1\n";
  s += fmt::format("set multiplot layout {},{} title {} font ',13'\n", panelRows, columns,
                   gnuplotQuoted(title.empty() ? "retrieval accuracy by length and depth" : title));
  for (size_t p = 0; p < panels.size(); ++p) {
    const Panel& panel = panels[p];
    std::set<int64_t> lengths;
    std::set<double> depths;
    for (const auto& [cell, acc] : panel.accuracy) lengths.insert(cell.first), depths.insert(cell.second);
    std::vector<int64_t> xs(lengths.begin(), lengths.end());
    std::vector<double> ys(depths.begin(), depths.end());
    // Cells on an index grid (lengths are often doubling, depths even): tics name the values.
    s += fmt::format("$h{} << EOD\n", p);
    for (size_t y = 0; y < ys.size(); ++y) {
      for (size_t x = 0; x < xs.size(); ++x) {
        auto it = panel.accuracy.find({xs[x], ys[y]});
        s += fmt::format("{} {} {}\n", x, y,
                         it == panel.accuracy.end() ? std::string("NaN") : fmt::format("{:.1f}", 100 * it->second));
      }
      s += "\n";
    }
    s += "EOD\n";
    std::string xtics, ytics;
    for (size_t x = 0; x < xs.size(); ++x)
      xtics += fmt::format("{}'{}{}' {}", x ? ", " : "", xs[x], xs[x] == panel.Ltrain ? " (L)" : "", x);
    for (size_t y = 0; y < ys.size(); ++y) ytics += fmt::format("{}'{:g}' {}", y ? ", " : "", ys[y], y);
    s += fmt::format("set title {} font ',10'\nset xtics ({}) rotate by 30 right\nset ytics ({})\n",
                     gnuplotQuoted(panel.title()), xtics, ytics);
    s += fmt::format("set xrange [-0.5:{}]\nset yrange [{}:-0.5]\n", double(xs.size()) - 0.5, double(ys.size()) - 0.5);
    s += fmt::format(
        "plot $h{0} using 1:2:3 with image, $h{0} using 1:2:(sprintf('%.0f', $3)) with labels font ',8' "
        "tc rgb '#222222'\n",
        p);
  }
  s += "unset multiplot\n";
  return out;
}

std::filesystem::path retrievalPlotPath(const std::filesystem::path& png) {
  return png.parent_path() / (png.stem().string() + "-retrieval" + png.extension().string());
}

void plotRetrievalHeatmaps(const std::filesystem::path& png, const std::vector<EvalRow>& rows,
                           const std::string& title) {
  if (png.extension() != ".png") throw std::invalid_argument("--plot must end in .png: " + png.string());
  HeatmapScript h = retrievalHeatmapScript(rows, title);
  drawPng(png, h.script, h.width, h.height);
}

}  // namespace xtrap
