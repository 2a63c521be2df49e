#pragma once
// Perplexity vs Lvalid the way the ALiBi paper's Figure 1 draws it: one colour per position
// method (the same in every picture xtrap draws), variants of a method by dash and point type,
// one panel per evaluation mode with a shared y axis, log x (log y when the values span more
// than 3x), the training length marked; and a second figure of ppl(Lvalid) / ppl(L), so runs of
// different quality compare.
#include <filesystem>
#include <string>
#include <vector>

#include "eval/eval_report.h"

namespace xtrap {

// "#rrggbb" of a position method; black for a name outside the table.
std::string positionColour(const std::string& pos);

// Gnuplot scripts (without terminal/output) of the two figures, data inline.
struct PerplexityScripts {
  std::string ppl, ratio;
  int width = 0, height = 0;
};
PerplexityScripts perplexityPlotScripts(const std::vector<EvalRow>& rows, const std::string& title);

// FILE.png -> FILE-ratio.png: where the ratio figure goes.
std::filesystem::path ratioPlotPath(const std::filesystem::path& png);

// Draws FILE.png and FILE-ratio.png. Throws PlotterMissing (util/gnuplot.h) or a one-line error.
void plotPerplexity(const std::filesystem::path& png, const std::vector<EvalRow>& rows, const std::string& title);

}  // namespace xtrap
