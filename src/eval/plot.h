#pragma once
// Perplexity vs Lvalid (log x), one line per (run, mode, interp), drawn by gnuplot into a PNG.
#include <filesystem>
#include <vector>

#include "eval/eval_report.h"

namespace xtrap {

// Throws a one-line error if gnuplot is missing or fails; the PNG appears only when complete.
void plotPerplexity(const std::filesystem::path& png, const std::vector<EvalRow>& rows, const std::string& title);

}  // namespace xtrap
