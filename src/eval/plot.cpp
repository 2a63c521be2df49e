#include "eval/plot.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <stdexcept>

#include "util/gnuplot.h"

namespace xtrap {
namespace fs = std::filesystem;

std::string positionColour(const std::string& pos) {
  // Tableau 10, fixed per method: ALiBi red, sinusoidal blue, rotary green as in most papers.
  static const std::map<std::string, std::string> colours = {{"none", "#7f7f7f"},
                                                             {"sinusoidal", "#1f77b4"},
                                                             {"learned", "#8c564b"},
                                                             {"rotary", "#2ca02c"},
                                                             {"t5", "#9467bd"},
                                                             {"alibi", "#d62728"},
                                                             {"alibi-offset", "#ff7f0e"},
                                                             {"alibi-onesided", "#e377c2"},
                                                             {"alibi-learned", "#bcbd22"},
                                                             {"bialibi", "#17becf"},
                                                             {"kerple-log", "#393b79"},
                                                             {"fire", "#8c6d31"}};
  auto it = colours.find(pos);
  return it == colours.end() ? "#000000" : it->second;
}

fs::path ratioPlotPath(const fs::path& png) {
  return png.parent_path() / (png.stem().string() + "-ratio" + png.extension().string());
}

namespace {

// A line: one run under one interpolation, drawn in every panel where it has points.
struct Series {
  std::string run, pos, interp, extend;
  std::string interpShown;  // interpolationDisplay: with its factor a when one a serves the line
  int64_t Ltrain = 0;
  int variant = 0;  // index among the series of the same position method: dash and point type
  std::string label() const {
    std::string s = run == pos ? run : fmt::format("{} ({})", run, pos);
    return interpShown == "none" ? s : s + ", " + interpShown;
  }
};

// A panel: one evaluation mode.
struct Panel {
  std::string mode;
  std::set<int64_t> strides;
  std::string title() const {
    if (mode == "nonoverlap") return "non-overlapping windows";
    if (mode != "sliding") return mode;
    std::string s;
    for (int64_t stride : strides) s += (s.empty() ? "" : "/") + std::to_string(stride);
    return "sliding window, stride " + s;
  }
};

const int kPointTypes[] = {7, 5, 9, 11, 13, 15, 4, 6};

bool useLogY(double lo, double hi) { return hi > 3 * lo; }

// The corner of the panel where a legend of w x h (fractions of the panel) covers the fewest
// points (x and y in [0, 1] after the axes' scaling), and how many it covers there.
std::pair<std::string, int> legendCorner(const std::vector<std::pair<double, double>>& unitPoints, double w, double h) {
  const char* names[] = {"top left", "top right", "bottom left", "bottom right"};
  int best = 0, bestCovered = INT32_MAX;
  for (int c = 0; c < 4; ++c) {
    bool right = c % 2, bottom = c / 2;
    int covered = 0;
    for (auto [x, y] : unitPoints) covered += (right ? x > 1 - w : x < w) && (bottom ? y < h : y > 1 - h);
    if (covered < bestCovered) best = c, bestCovered = covered;
  }
  return {names[best], bestCovered};
}

// Padded y range of data in [lo, hi]; `headroom` > 0 adds that fraction of the panel above the
// data (for the legend).
std::string axisSettings(double lo, double hi, double headroom, const std::string& label) {
  bool logY = useLogY(lo, hi);
  double pad = logY ? 1.08 : 1.0;
  double margin = logY ? 0 : 0.06 * std::max(hi - lo, 1e-3 * hi);
  double bottom = lo / pad - margin, top = hi * pad + margin;
  if (headroom > 0)
    top = logY ? bottom * std::pow(top / bottom, 1 / (1 - headroom)) : bottom + (top - bottom) / (1 - headroom);
  return fmt::format("{}set yrange [{:.6g}:{:.6g}]\nset ylabel {}\n", logY ? "set logscale y\n" : "unset logscale y\n",
                     bottom, top, gnuplotQuoted(label));
}

}  // namespace

PerplexityScripts perplexityPlotScripts(const std::vector<EvalRow>& rows, const std::string& title) {
  if (rows.empty()) throw std::invalid_argument("nothing to plot: no evaluation rows");
  std::vector<Series> series;
  std::vector<Panel> panels;
  auto seriesIndex = [&](const EvalRow& r) {
    for (size_t i = 0; i < series.size(); ++i)
      if (series[i].run == r.run && series[i].interp == r.interp && series[i].extend == r.extend &&
          series[i].pos == r.pos)
        return i;
    int variant = int(std::count_if(series.begin(), series.end(), [&](const Series& s) { return s.pos == r.pos; }));
    series.push_back({r.run, r.pos, r.interp, r.extend, interpolationDisplay(r), r.Ltrain, variant});
    return series.size() - 1;
  };
  auto panelIndex = [&](const EvalRow& r) {
    for (size_t i = 0; i < panels.size(); ++i)
      if (panels[i].mode == r.mode) return i;
    panels.push_back({r.mode, {}});
    return panels.size() - 1;
  };
  // (panel, series) -> Lvalid -> seed -> ppl; a run of several seeds is drawn as their mean
  std::map<std::pair<size_t, size_t>, std::map<int64_t, std::map<int64_t, double>>> bySeed;
  std::set<int64_t> trainLengths;
  int64_t xMin = rows.front().Lvalid, xMax = xMin;
  for (const auto& r : rows) {
    size_t p = panelIndex(r), s = seriesIndex(r);
    if (r.mode == "sliding") panels[p].strides.insert(r.stride);
    bySeed[{p, s}][r.Lvalid][r.seed] = r.ppl;
    trainLengths.insert(r.Ltrain);
    xMin = std::min(xMin, r.Lvalid), xMax = std::max(xMax, r.Lvalid);
  }
  std::map<std::pair<size_t, size_t>, std::map<int64_t, double>> points;  // (panel, series) -> Lvalid -> ppl
  for (const auto& [key, line] : bySeed)
    for (const auto& [x, seeds] : line) {
      double sum = 0;
      for (const auto& [seed, ppl] : seeds) sum += ppl;
      points[key][x] = sum / double(seeds.size());
    }
  // Non-overlapping first, as in the paper.
  std::vector<size_t> panelOrder(panels.size());
  for (size_t i = 0; i < panels.size(); ++i) panelOrder[i] = i;
  std::stable_sort(panelOrder.begin(), panelOrder.end(), [&](size_t a, size_t b) {
    return panels[a].mode == "nonoverlap" && panels[b].mode != "nonoverlap";
  });

  // The ratio's reference: the same run and mode at Lvalid = L_train (any interpolation, a = 1
  // there), else the series' own shortest Lvalid.
  bool fallback = false;
  std::map<std::pair<size_t, size_t>, std::map<int64_t, double>> ratios;
  for (const auto& [key, line] : points) {
    const Series& s = series[key.second];
    double ref = 0;
    for (const auto& [other, otherLine] : points)
      if (other.first == key.first && series[other.second].run == s.run && otherLine.count(s.Ltrain))
        ref = otherLine.at(s.Ltrain);
    if (line.count(s.Ltrain)) ref = line.at(s.Ltrain);
    if (ref <= 0) ref = line.begin()->second, fallback = true;
    for (const auto& [x, ppl] : line) ratios[key][x] = ppl / ref;
  }

  auto figure = [&](const std::map<std::pair<size_t, size_t>, std::map<int64_t, double>>& data,
                    const std::string& figureTitle, const std::string& yLabel, bool unitLine) {
    double lo = INFINITY, hi = 0;
    for (const auto& [key, line] : data)
      for (const auto& [x, y] : line) lo = std::min(lo, y), hi = std::max(hi, y);
    // The legend goes inside the first panel, in its emptiest corner; if every corner holds data,
    // top left above the data, which then keeps to the lower 60% of the panel.
    std::vector<std::pair<double, double>> unitPoints;
    bool logY = useLogY(lo, hi);
    auto scaled = [&](double v, double a, double b, bool log) {
      return log ? std::log(v / a) / std::log(b / a) : (v - a) / std::max(b - a, 1e-12);
    };
    for (const auto& [key, line] : data) {
      if (key.first != panelOrder.front()) continue;
      std::pair<double, double> last{-1, -1};
      for (const auto& [x, y] : line) {
        std::pair<double, double> at{scaled(double(x), xMin / 1.25, xMax * 1.25, true), scaled(y, lo, hi, logY)};
        for (int t = 1; last.first >= 0 && t < 8; ++t)  // the segment between points covers the panel too
          unitPoints.emplace_back(last.first + (at.first - last.first) * t / 8,
                                  last.second + (at.second - last.second) * t / 8);
        unitPoints.push_back(at), last = at;
      }
    }
    // Legend size from its text (9-point font: ~6.5 px a character, ~16 px a line; panel ~540 x 440).
    size_t longest = 0;
    for (const auto& line : series) longest = std::max(longest, line.label().size());
    double keyWidth = std::min(0.95, (60 + 6.5 * double(longest)) / 540),
           keyHeight = (12 + 16.0 * double(series.size())) / 440;
    auto [corner, covered] = legendCorner(unitPoints, keyWidth, keyHeight);
    double headroom = covered > 0 ? std::min(0.6, keyHeight + 0.03) : 0;
    if (covered > 0) corner = "top left";
    std::string script;
    for (const auto& [key, line] : data) {
      script += fmt::format("$d{}_{} << EOD\n", key.first, key.second);
      for (const auto& [x, y] : line) script += fmt::format("{} {:.6g}\n", x, y);
      script += "EOD\n";
    }
    script += fmt::format(
        "set multiplot layout 1,{} title {} font ',13'\nset logscale x 2\nset xrange [{:.6g}:{:.6g}]\n"
        "set format x '%.0f'\nset grid xtics ytics lc rgb '#dddddd'\nset xlabel 'Lvalid (tokens)'\n"
        "set border lw 1\nset offsets 0,0,0,0\n{}",
        panels.size(), gnuplotQuoted(figureTitle), xMin / 1.25, xMax * 1.25, axisSettings(lo, hi, headroom, yLabel));
    for (int64_t L : trainLengths)
      script += fmt::format(
          "set arrow from {0}, graph 0 to {0}, graph 1 nohead dt 2 lw 1.5 lc rgb '#444444'\n"
          "set label 'L = {0}' at {0}, graph 0.03 offset 0.4,0 tc rgb '#444444'\n",
          L);
    if (unitLine) script += "set arrow from graph 0, first 1 to graph 1, first 1 nohead lw 1 lc rgb '#444444'\n";
    for (size_t n = 0; n < panelOrder.size(); ++n) {
      size_t p = panelOrder[n];
      // One legend; the other panels share its colours.
      script += fmt::format("set title {}\n{}\n", gnuplotQuoted(panels[p].title()),
                            n == 0 ? fmt::format("set key inside {} Left reverse opaque box lc rgb '#bbbbbb' font ',9' "
                                                 "spacing 1.1",
                                                 corner)
                                   : "unset key");
      std::string plot;
      for (size_t s = 0; s < series.size(); ++s) {
        if (!data.count({p, s})) continue;
        const Series& line = series[s];
        plot += fmt::format("{}$d{}_{} using 1:2 with linespoints lw 2 lc rgb '{}' dt {} pt {} ps 1.1 title {}",
                            plot.empty() ? "" : ", \\\n  ", p, s, positionColour(line.pos), 1 + line.variant % 5,
                            kPointTypes[line.variant % 8], gnuplotQuoted(line.label()));
      }
      script += "plot " + plot + "\n";
    }
    return script + "unset multiplot\n";
  };
  PerplexityScripts out;
  out.width = 80 + 620 * int(panels.size());
  out.height = 560;
  out.ppl = figure(points, title, "perplexity", false);
  out.ratio =
      figure(ratios, title, fallback ? "ppl(Lvalid) / ppl(L or shortest Lvalid)" : "ppl(Lvalid) / ppl(L)", true);
  return out;
}

void plotPerplexity(const fs::path& png, const std::vector<EvalRow>& rows, const std::string& title) {
  if (png.extension() != ".png") throw std::invalid_argument("--plot must end in .png: " + png.string());
  PerplexityScripts scripts = perplexityPlotScripts(rows, title);
  drawPng(png, scripts.ppl, scripts.width, scripts.height);
  drawPng(ratioPlotPath(png), scripts.ratio, scripts.width, scripts.height);
}

}  // namespace xtrap
