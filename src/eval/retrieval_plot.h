#pragma once
// The "needle in a haystack" picture of retrieval rows: one panel per (run, task, filler,
// interpolation), prompt length (Lvalid, training length marked) across, answer depth down, each
// cell coloured by accuracy on one fixed 0-100% scale and labelled with it, so panels compare at
// a glance and the figure reads without its CSV.
#include <filesystem>
#include <string>
#include <vector>

#include "eval/eval_report.h"

namespace xtrap {

struct HeatmapScript {
  std::string script;  // gnuplot, data inline
  int width = 0, height = 0;
  size_t panels = 0;
};
// Only the retrieval rows of `rows` are drawn; none is an error.
HeatmapScript retrievalHeatmapScript(const std::vector<EvalRow>& rows, const std::string& title = "");

// FILE.png -> FILE-retrieval.png: where heatmaps go beside a perplexity figure.
std::filesystem::path retrievalPlotPath(const std::filesystem::path& png);

// Draws the heatmaps into FILE.png. Throws PlotterMissing (util/gnuplot.h) or a one-line error.
void plotRetrievalHeatmaps(const std::filesystem::path& png, const std::vector<EvalRow>& rows,
                           const std::string& title = "");

}  // namespace xtrap
