#pragma once
// Pictures of attention (torch-free): per-head heatmaps of a window, pooled to at most
// cells x cells, and the mean attention distance per head vs query position, several runs side
// by side. The maps are filled by attention_dump.cpp's observer, block by block of query rows.
#include <filesystem>
#include <string>
#include <vector>

namespace xtrap {

struct HeadPicture {
  int64_t layer = 0, head = 0;
  double slope = 0;                 // ALiBi slope used, 0 = none
  std::vector<float> map;           // (cells, cells) row-major: mean attention of the pooled block
  std::vector<float> meanDistance;  // (N): sum_j p_ij |i - j| per query i
};

struct RunPicture {
  std::string label, pos;
  int64_t Ltrain = 0, N = 0, cells = 0;
  bool causal = true;
  std::vector<HeadPicture> heads;  // the selected layers x heads
};

// First and one-past-last position pooled into cell c of a side of N positions.
int64_t poolStart(int64_t c, int64_t N, int64_t cells);

// Gnuplot scripts (data inline) for FILE.png (heatmaps) and FILE-distance.png.
struct AttentionScripts {
  std::string heatmaps, distance;
  int heatmapWidth = 0, heatmapHeight = 0, distanceWidth = 0, distanceHeight = 0;
};
AttentionScripts attentionPlotScripts(const std::vector<RunPicture>& runs);

std::filesystem::path distancePlotPath(const std::filesystem::path& png);  // FILE.png -> FILE-distance.png

// Draws both. Throws PlotterMissing (util/gnuplot.h) or a one-line error.
void plotAttention(const std::filesystem::path& png, const std::vector<RunPicture>& runs);

}  // namespace xtrap
