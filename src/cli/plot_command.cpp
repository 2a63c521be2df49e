#include <cstdio>

#include "cli/commands.h"
#include "eval/plot.h"
#include "util/atomic_file.h"
#include "util/gnuplot.h"

namespace xtrap {

CommandAction addPlotCommand(CLI::App& cmd) {
  auto csvs = std::make_shared<std::vector<std::string>>();
  auto out = std::make_shared<std::string>();
  auto title = std::make_shared<std::string>("perplexity vs evaluation length");
  cmd.add_option("results", *csvs, "results files written by eval or run (.csv or .json)")->required();
  cmd.add_option("--out", *out, "PNG to draw; the ratio figure goes beside it as NAME-ratio.png")->required();
  cmd.add_option("--title", *title, "figure title")->capture_default_str();
  return [=] {
    std::vector<EvalRow> rows;
    for (const auto& file : *csvs) {
      auto more = readEvalRows(file);
      rows.insert(rows.end(), more.begin(), more.end());
    }
    requireWritableDirectoryFor(*out);
    plotPerplexity(*out, rows, *title);
    std::fprintf(stderr, "plot: %s and %s\n", out->c_str(), ratioPlotPath(*out).c_str());
  };
}

}  // namespace xtrap
