#pragma once
// gnuplot draws every picture xtrap makes: a generated script (data inline as datablocks) in, a
// PNG out. The program is $XTRAP_GNUPLOT when set (tests point it at a missing one), else gnuplot.
#include <filesystem>
#include <stdexcept>
#include <string>

namespace xtrap {

// No plotter to run. Callers that plot as a by-product (xtrap run) warn and go on; callers asked
// for a picture check gnuplotAvailable() before any work.
struct PlotterMissing : std::runtime_error {
  using std::runtime_error::runtime_error;
};

std::string gnuplotProgram();
bool gnuplotAvailable();
// One-line error naming the program, the file it would draw and how to fix it.
std::string plotterMissingMessage(const std::filesystem::path& png);

// Runs `script` (everything after `set terminal` / `set output`) on a width x height canvas and
// moves the PNG into place only when complete (gnuplot's status, isCompletePng). Throws
// PlotterMissing, or runtime_error when gnuplot rejects the script or its file is incomplete.
void drawPng(const std::filesystem::path& png, const std::string& script, int width, int height);

// True when `file` starts with the PNG signature and ends with the IEND chunk: a truncated
// write fails this.
bool isCompletePng(const std::filesystem::path& file);

// 'text' for a gnuplot single-quoted string (a quote is doubled).
std::string gnuplotQuoted(const std::string& text);

}  // namespace xtrap
