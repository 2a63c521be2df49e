#include "util/gnuplot.h"

#include <fmt/format.h>

#include <cstdlib>
#include <cstring>
#include <fstream>

#include "util/atomic_file.h"

namespace xtrap {
namespace fs = std::filesystem;

std::string gnuplotProgram() {
  const char* env = std::getenv("XTRAP_GNUPLOT");
  return env && *env ? env : "gnuplot";
}

namespace {
// Single-quoted for /bin/sh.
std::string shellQuoted(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

int runScript(const fs::path& scriptFile, bool quiet) {
  return std::system(fmt::format("{} {}{}", shellQuoted(gnuplotProgram()), shellQuoted(scriptFile.string()),
                                 quiet ? " 2>/dev/null" : "")
                         .c_str());
}
}  // namespace

bool isCompletePng(const fs::path& file) {
  static const char kSignature[8] = {'\x89', 'P', 'N', 'G', '\r', '\n', '\x1a', '\n'};
  // The last chunk: length 0, type IEND, its CRC.
  static const char kEnd[12] = {0, 0, 0, 0, 'I', 'E', 'N', 'D', '\xae', '\x42', '\x60', '\x82'};
  std::ifstream in(file, std::ios::binary);
  char head[8], tail[12];
  if (!in.read(head, 8) || !in.seekg(-12, std::ios::end) || !in.read(tail, 12)) return false;
  return std::memcmp(head, kSignature, 8) == 0 && std::memcmp(tail, kEnd, 12) == 0;
}

bool gnuplotAvailable() {
  return std::system(fmt::format("{} --version >/dev/null 2>&1", shellQuoted(gnuplotProgram())).c_str()) == 0;
}

std::string plotterMissingMessage(const fs::path& png) {
  return fmt::format("{} not found: {} not drawn (install gnuplot or set XTRAP_GNUPLOT)", gnuplotProgram(),
                     png.string());
}

std::string gnuplotQuoted(const std::string& text) {
  std::string out = "'";
  for (char c : text) out += c == '\'' ? std::string("''") : std::string(1, c);
  return out + "'";
}

void drawPng(const fs::path& png, const std::string& script, int width, int height) {
  if (png.extension() != ".png") throw std::invalid_argument("plot file must end in .png: " + png.string());
  if (!gnuplotAvailable()) throw PlotterMissing(plotterMissingMessage(png));
  removeStaleTemporariesOf(png);
  auto tmp = temporarySibling(png);
  auto scriptFile = fs::path(tmp.string() + ".gp");
  auto header = [&](const char* terminal) {
    return fmt::format("set terminal {} size {},{} noenhanced font 'DejaVu Sans,11'\nset output {}\n", terminal, width,
                       height, gnuplotQuoted(tmp.string()));
  };
  writeTextAtomically(scriptFile, header("pngcairo") + script);
  int rc = runScript(scriptFile, true);
  if (rc != 0) {
    // pngcairo may be missing in gnuplot-nox builds; fall back to the plain png terminal.
    writeTextAtomically(scriptFile, header("png") + script);
    rc = runScript(scriptFile, false);
  }
  std::error_code ignored;
  fs::remove(scriptFile, ignored);
  if (rc != 0 || !fs::exists(tmp)) {
    fs::remove(tmp, ignored);
    throw std::runtime_error("gnuplot failed to draw " + png.string());
  }
  // gnuplot exits 0 even when its writes failed (a full disk): only a whole PNG is kept.
  if (!isCompletePng(tmp)) {
    std::string why = fs::exists(tmp) ? "the file it wrote is incomplete (disk full?)" : "no file";
    fs::remove(tmp, ignored);
    throw std::runtime_error("gnuplot failed to draw " + png.string() + ": " + why);
  }
  commitTemporary(tmp, png);
}

}  // namespace xtrap
