#pragma once
// One-line progress on stderr: "[####......] 120/1000 loss 5.31 | 8.2k tok/s | ETA 1m40s".
// Redrawn in place on a terminal (at most 10 times a second); on a pipe or file a plain line is
// printed every 10% so logs stay readable.
#include <chrono>
#include <cstdint>
#include <string>

namespace xtrap {

class ProgressBar {
 public:
  ProgressBar(std::string label, int64_t total);
  void update(int64_t done, const std::string& detail = "");
  void finish(const std::string& detail = "");

 private:
  std::string label_;
  int64_t total_, lastDecile_ = -1;
  bool tty_;
  std::chrono::steady_clock::time_point start_, lastDraw_;
};

std::string formatDuration(double seconds);  // 95 -> "1m35s"

}  // namespace xtrap
