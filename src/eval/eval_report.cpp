#include "eval/eval_report.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <stdexcept>

#include "util/atomic_file.h"

namespace xtrap {

std::string formatEvalTable(const std::vector<EvalRow>& rows) {
  std::string out = fmt::format(
      "{:<28} {:<14} {:>6} {:>7} {:<10} {:>6} {:<11} {:>6} {:>9} {:>8} {:>10} {:>8} {:>9} {:>7}\n", "run", "pos", "L",
      "Lvalid", "mode", "stride", "interp", "a", "tokens", "nll", "ppl", "sec", "tok/s", "GFLOP/s");
  for (const auto& r : rows)
    out += fmt::format(
        "{:<28} {:<14} {:>6} {:>7} {:<10} {:>6} {:<11} {:>6.3g} {:>9} {:>8.4f} {:>10.2f} {:>8.1f} {:>9.0f} {:>7.1f}\n",
        r.run.substr(0, 28), r.pos, r.Ltrain, r.Lvalid, r.mode, r.stride, r.interp, r.scale, r.tokensScored, r.nll,
        r.ppl, r.seconds, r.tokensPerSecond, r.flopsPerSecond / 1e9);
  return out;
}

void writeEvalRows(const std::filesystem::path& file, const std::vector<EvalRow>& rows) {
  auto ext = file.extension().string();
  if (ext == ".json") {
    auto list = nlohmann::json::array();
    for (const auto& r : rows)
      list.push_back({{"run", r.run},
                      {"arch", r.arch},
                      {"pos", r.pos},
                      {"L_train", r.Ltrain},
                      {"Lvalid", r.Lvalid},
                      {"split", r.split},
                      {"mode", r.mode},
                      {"stride", r.stride},
                      {"interp", r.interp},
                      {"scale", r.scale},
                      {"slopes", r.slopes},
                      {"tokens_scored", r.tokensScored},
                      {"nll", r.nll},
                      {"ppl", r.ppl},
                      {"seconds", r.seconds},
                      {"tokens_per_s", r.tokensPerSecond},
                      {"flop_per_s", r.flopsPerSecond}});
    writeTextAtomically(file, list.dump(2) + "\n");
    return;
  }
  if (ext != ".csv") throw std::invalid_argument("--out must end in .csv or .json: " + file.string());
  std::string csv =
      "run,arch,pos,L_train,Lvalid,split,mode,stride,interp,scale,slopes,tokens_scored,nll,ppl,seconds,tokens_per_s,"
      "flop_per_s\n";
  for (const auto& r : rows)
    csv += fmt::format("{},{},{},{},{},{},{},{},{},{},\"{}\",{},{:.6f},{:.4f},{:.3f},{:.1f},{:.4g}\n", r.run, r.arch,
                       r.pos, r.Ltrain, r.Lvalid, r.split, r.mode, r.stride, r.interp, r.scale, r.slopes,
                       r.tokensScored, r.nll, r.ppl, r.seconds, r.tokensPerSecond, r.flopsPerSecond);
  writeTextAtomically(file, csv);
}

}  // namespace xtrap
