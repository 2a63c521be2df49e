#include "eval/plot.h"

#include <fmt/format.h>

#include <cstdlib>
#include <map>
#include <stdexcept>

#include "util/atomic_file.h"

namespace xtrap {
namespace fs = std::filesystem;

void plotPerplexity(const fs::path& png, const std::vector<EvalRow>& rows, const std::string& title) {
  if (png.extension() != ".png") throw std::invalid_argument("--plot must end in .png: " + png.string());
  std::map<std::string, std::vector<const EvalRow*>> lines;
  for (const auto& r : rows) {
    std::string key = fmt::format("{} {} {}", r.run, r.mode, r.interp);
    lines[key].push_back(&r);
  }
  auto tmp = temporarySibling(png);
  auto dataFile = fs::path(tmp.string() + ".dat"), scriptFile = fs::path(tmp.string() + ".gp");
  std::string data, plotCmd;
  int index = 0;
  for (const auto& [key, points] : lines) {
    data += fmt::format("# {}\n", key);
    for (const auto* r : points) data += fmt::format("{} {}\n", r->Lvalid, r->ppl);
    data += "\n\n";
    plotCmd +=
        fmt::format("{}'{}' index {} with linespoints title '{}'", index ? ", " : "", dataFile.string(), index, key);
    ++index;
  }
  writeTextAtomically(dataFile, data);
  writeTextAtomically(scriptFile, fmt::format("set terminal pngcairo size 1000,650 noenhanced\n"
                                              "set output '{}'\nset logscale x 2\nset grid\n"
                                              "set xlabel 'Lvalid (tokens)'\nset ylabel 'perplexity'\n"
                                              "set title '{}'\nset key outside right\nplot {}\n",
                                              tmp.string(), title, plotCmd));
  int rc = std::system(fmt::format("gnuplot '{}' 2>/dev/null", scriptFile.string()).c_str());
  if (rc != 0) {
    // pngcairo may be missing in gnuplot-nox builds; fall back to the plain png terminal.
    std::string script = readTextFile(scriptFile);
    script.replace(script.find("pngcairo"), 8, "png");
    writeTextAtomically(scriptFile, script);
    rc = std::system(fmt::format("gnuplot '{}'", scriptFile.string()).c_str());
  }
  fs::remove(dataFile);
  fs::remove(scriptFile);
  if (rc != 0 || !fs::exists(tmp)) {
    std::error_code ignored;
    fs::remove(tmp, ignored);
    throw std::runtime_error("gnuplot failed to draw " + png.string() + " (is gnuplot installed?)");
  }
  commitTemporary(tmp, png);
}

}  // namespace xtrap
