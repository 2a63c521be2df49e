#pragma once
// The markdown tables of results/<scenario>/table.md, shaped like the paper's: one row per
// variant (and interpolation, when a table has several), one column per Lvalid, perplexity in
// the cells, and a last column with ppl(longest) / ppl(shortest) so the extrapolation trend of
// each row reads at a glance.
#include <string>
#include <vector>

#include "eval/eval_report.h"

namespace xtrap {

// `rows` are one evaluation setting's rows (same mode and stride); row labels come from
// EvalRow::run, in first-seen order. Missing cells print as "-". Rows of one variant with
// several seeds (EvalRow::seed) give "mean ± sample standard deviation" cells; the ratio column
// is the mean of the per-seed ratios.
std::string formatMarkdownTable(const std::string& title, const std::vector<EvalRow>& rows);

// Retrieval rows (one task and filler): one row per variant and interpolation (labelled with its
// factor a), one column per Lvalid; a cell pools every depth's (and seed's) trials and gives the
// worst depth's accuracy beside it.
std::string formatRetrievalMarkdownTable(const std::string& title, const std::vector<EvalRow>& rows);

}  // namespace xtrap
