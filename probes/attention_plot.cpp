#include "attention_plot.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <stdexcept>

#include "util/gnuplot.h"

namespace xtrap {
namespace fs = std::filesystem;

int64_t poolStart(int64_t c, int64_t N, int64_t cells) { return c * N / cells; }

fs::path distancePlotPath(const fs::path& png) {
  return png.parent_path() / (png.stem().string() + "-distance" + png.extension().string());
}

namespace {

// Below this a probability is drawn in the lowest colour: a fixed range, so every panel compares.
constexpr double kFloor = 1e-6;
// Viridis (perceptually uniform, readable in grey), for the heatmaps and the head order.
const char* kViridis =
    "set palette defined (0 '#440154', 1 '#414487', 2 '#2a788e', 3 '#22a884', 4 '#7ad151', 5 '#fde725')\n";
// Points per distance curve: the curves are averaged over bins of query positions beyond this.
constexpr int64_t kCurvePoints = 512;

// Short enough for a panel a quarter of the figure wide: the position method names the row (the
// figure title names the runs).
std::string headTitle(const RunPicture& run, const HeadPicture& h) {
  std::string t = fmt::format("{}  L{} H{}", run.pos, h.layer, h.head);
  return h.slope > 0 ? t + fmt::format("  m={:.3g}", h.slope) : t;
}

// A cell that holds only masked (future) positions has no attention at all: drawn blank (NaN).
bool maskedCell(const RunPicture& run, int64_t row, int64_t col) {
  return run.causal && poolStart(col, run.N, run.cells) > poolStart(row + 1, run.N, run.cells) - 1;
}

std::string heatmapScript(const std::vector<RunPicture>& runs, int& width, int& height) {
  // Rows: (run, layer); columns: that run's selected heads.
  int64_t rows = 0, cols = 0;
  for (const auto& run : runs) {
    std::set<int64_t> layers, heads;
    for (const auto& h : run.heads) layers.insert(h.layer), heads.insert(h.head);
    rows += int64_t(layers.size()), cols = std::max<int64_t>(cols, int64_t(heads.size()));
  }
  std::string script;
  for (size_t r = 0; r < runs.size(); ++r)
    for (size_t k = 0; k < runs[r].heads.size(); ++k) {
      const RunPicture& run = runs[r];
      const auto& map = run.heads[k].map;
      script += fmt::format("$m{}_{} << EOD\n", r, k);
      for (int64_t i = 0; i < run.cells; ++i) {
        for (int64_t j = 0; j < run.cells; ++j) {
          float p = map[i * run.cells + j];
          script += maskedCell(run, i, j) ? "NaN" : fmt::format("{:.3g}", std::max<double>(p, kFloor));
          script += j + 1 < run.cells ? ' ' : '\n';
        }
      }
      script += "EOD\n";
    }
  std::string runNames;
  for (const auto& run : runs) runNames += (runNames.empty() ? "rows: " : ", ") + run.pos + " = " + run.label;
  script += kViridis;
  script += fmt::format(
      "set multiplot layout {},{} title {} font ',13'\nset logscale cb\nset cbrange [{}:1]\n"
      "set format cb '1e%T'\nset cbtics font ',8'\nset tics font ',8'\nset size ratio -1\n"
      "set xlabel 'key position' font ',9' offset 0,0.5\nset ylabel 'query position' font ',9' offset 1,0\n"
      "set title font ',10'\nunset key\n",
      rows, cols, gnuplotQuoted("attention (log colour); dashed: distance = L_train; " + runNames), kFloor);
  for (size_t r = 0; r < runs.size(); ++r) {
    const RunPicture& run = runs[r];
    double pixel = double(run.N) / double(run.cells);
    script += fmt::format("set xrange [0:{0}]\nset yrange [{0}:0]\nunset arrow\n", run.N);
    if (run.Ltrain < run.N) {
      script += fmt::format("set arrow from 0,{0} to {1},{2} nohead dt 2 lw 1.5 lc rgb 'white' front\n", run.Ltrain,
                            run.N - run.Ltrain, run.N);
      if (!run.causal)
        script += fmt::format("set arrow from {0},0 to {2},{1} nohead dt 2 lw 1.5 lc rgb 'white' front\n", run.Ltrain,
                              run.N - run.Ltrain, run.N);
    }
    int64_t layer = run.heads.empty() ? 0 : run.heads.front().layer, inRow = 0;
    for (size_t k = 0; k < run.heads.size(); ++k) {
      const HeadPicture& h = run.heads[k];
      if (h.layer != layer) {
        for (; inRow < cols; ++inRow) script += "set multiplot next\n";
        layer = h.layer, inRow = 0;
      }
      script +=
          fmt::format("set title {}\nplot $m{}_{} matrix using (($1+0.5)*{:.6g}):(($2+0.5)*{:.6g}):3 with image\n",
                      gnuplotQuoted(headTitle(run, h)), r, k, pixel, pixel);
      ++inRow;
    }
    for (; inRow < cols && r + 1 < runs.size(); ++inRow) script += "set multiplot next\n";
  }
  width = int(40 + 330 * cols);
  height = int(50 + 320 * rows);
  return script + "unset multiplot\n";
}

std::string distanceScript(const std::vector<RunPicture>& runs, int& width, int& height) {
  double top = 0;
  for (const auto& run : runs)
    for (const auto& h : run.heads)
      for (float d : h.meanDistance) top = std::max<double>(top, d);
  std::string script;
  for (size_t r = 0; r < runs.size(); ++r) {
    const RunPicture& run = runs[r];
    int64_t bin = (run.N + kCurvePoints - 1) / kCurvePoints;
    for (size_t k = 0; k < run.heads.size(); ++k) {
      script += fmt::format("$d{}_{} << EOD\n", r, k);
      const auto& d = run.heads[k].meanDistance;
      for (int64_t i0 = 0; i0 < run.N; i0 += bin) {
        int64_t i1 = std::min(run.N, i0 + bin);
        double sum = 0;
        for (int64_t i = i0; i < i1; ++i) sum += d[i];
        script += fmt::format("{:.6g} {:.6g}\n", 0.5 * double(i0 + i1 - 1), sum / double(i1 - i0));
      }
      script += "EOD\n";
    }
  }
  script += kViridis;
  script += fmt::format(
      "set multiplot layout 1,{} title {} font ',13'\nunset colorbox\nset grid lc rgb '#dddddd'\n"
      "set xlabel 'query position i'\nset ylabel 'mean attention distance  sum_j p_ij |i - j|'\n"
      "set yrange [0:{:.6g}]\nset key inside top left opaque box lc rgb '#bbbbbb' font ',9'\n",
      runs.size(), gnuplotQuoted("mean attention distance per head; dotted: uniform attention, dashed: L_train"),
      std::max(1.0, top * 1.05));
  for (size_t r = 0; r < runs.size(); ++r) {
    const RunPicture& run = runs[r];
    // Uniform attention over the visible keys: i/2 causal; sum_j |i-j| / N otherwise.
    std::string uniform = run.causal ? "x/2" : fmt::format("(x*(x+1)/2 + ({0}-1-x)*({0}-x)/2)/{0}", run.N);
    script += fmt::format(
        "set title {0}\nset xrange [0:{1}]\nunset arrow\n"
        "set arrow from {2}, graph 0 to {2}, graph 1 nohead dt 2 lw 1.5 lc rgb '#444444'\n",
        gnuplotQuoted(run.label + " (" + run.pos + ")"), run.N, run.Ltrain);
    std::string plot = fmt::format("{} with lines dt 3 lw 1.5 lc rgb '#888888' title 'uniform'", uniform);
    int64_t count = int64_t(run.heads.size());
    // Colour tells the heads apart, the dash pattern the layers: the first layer shown is solid.
    std::set<int64_t> layers;
    for (const auto& h : run.heads) layers.insert(h.layer);
    for (int64_t k = 0; k < count; ++k) {
      const HeadPicture& h = run.heads[k];
      auto layerRank = std::distance(layers.begin(), layers.find(h.layer));
      std::string label =
          fmt::format("L{} h{}", h.layer, h.head) + (h.slope > 0 ? fmt::format(" m={:.3g}", h.slope) : "");
      plot +=
          fmt::format(", \\\n  $d{}_{} using 1:2 with lines lw 2 dt {} lc palette frac {:.3f} title {}", r, k,
                      1 + layerRank % 5, count > 1 ? 0.9 * double(k) / double(count - 1) : 0.0, gnuplotQuoted(label));
    }
    script += "plot " + plot + "\n";
  }
  width = int(80 + 560 * runs.size());
  height = 520;
  return script + "unset multiplot\n";
}

}  // namespace

AttentionScripts attentionPlotScripts(const std::vector<RunPicture>& runs) {
  if (runs.empty()) throw std::invalid_argument("nothing to plot: no runs");
  for (const auto& run : runs) {
    if (run.heads.empty()) throw std::invalid_argument("nothing to plot: no heads selected for " + run.label);
    for (const auto& h : run.heads)
      if (int64_t(h.map.size()) != run.cells * run.cells || int64_t(h.meanDistance.size()) != run.N)
        throw std::logic_error("attention picture: map or distance of the wrong size");
  }
  AttentionScripts out;
  out.heatmaps = heatmapScript(runs, out.heatmapWidth, out.heatmapHeight);
  out.distance = distanceScript(runs, out.distanceWidth, out.distanceHeight);
  return out;
}

void plotAttention(const fs::path& png, const std::vector<RunPicture>& runs) {
  AttentionScripts s = attentionPlotScripts(runs);
  drawPng(png, s.heatmaps, s.heatmapWidth, s.heatmapHeight);
  drawPng(distancePlotPath(png), s.distance, s.distanceWidth, s.distanceHeight);
}

}  // namespace xtrap
