#include <cstdio>

#include "cli/commands.h"
#include "eval/plot.h"
#include "eval/retrieval_plot.h"
#include "util/atomic_file.h"
#include "util/gnuplot.h"

namespace xtrap {

CommandAction addPlotCommand(CLI::App& cmd) {
  auto csvs = std::make_shared<std::vector<std::string>>();
  auto out = std::make_shared<std::string>();
  auto title = std::make_shared<std::string>("perplexity vs evaluation length");
  cmd.add_option("results", *csvs, "results files written by eval or run (.csv or .json)")->required();
  cmd.add_option("--out", *out,
                 "PNG to draw; the ratio figure goes beside it as NAME-ratio.png (retrieval rows: their "
                 "heatmaps, NAME-retrieval.png when perplexity rows come too)")
      ->required();
  cmd.add_option("--title", *title, "figure title")->capture_default_str();
  return [=, &cmd] {
    std::vector<EvalRow> rows;
    for (const auto& file : *csvs) {
      auto more = readEvalRows(file);
      rows.insert(rows.end(), more.begin(), more.end());
    }
    requireWritableDirectoryFor(*out);
    std::vector<EvalRow> perplexity, retrieval;
    for (const auto& r : rows) (r.isRetrieval() ? retrieval : perplexity).push_back(r);
    if (!perplexity.empty()) {
      plotPerplexity(*out, perplexity, *title);
      std::fprintf(stderr, "plot: %s and %s\n", out->c_str(), ratioPlotPath(*out).c_str());
    }
    if (!retrieval.empty()) {
      std::filesystem::path heat = perplexity.empty() ? std::filesystem::path(*out) : retrievalPlotPath(*out);
      // The default title is perplexity's; retrieval figures then keep their own.
      plotRetrievalHeatmaps(heat, retrieval, cmd.count("--title") ? *title : "");
      std::fprintf(stderr, "heatmaps: %s\n", heat.c_str());
    }
  };
}

}  // namespace xtrap
