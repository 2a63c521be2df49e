#include "util/progress_bar.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>

namespace xtrap {

std::string formatDuration(double seconds) {
  auto s = static_cast<int64_t>(seconds + 0.5);
  if (s < 60) return fmt::format("{}s", s);
  if (s < 3600) return fmt::format("{}m{:02}s", s / 60, s % 60);
  return fmt::format("{}h{:02}m", s / 3600, (s % 3600) / 60);
}

ProgressBar::ProgressBar(std::string label, int64_t total)
    : label_(std::move(label)), total_(std::max<int64_t>(1, total)), tty_(::isatty(STDERR_FILENO) != 0) {
  start_ = lastDraw_ = std::chrono::steady_clock::now();
}

void ProgressBar::update(int64_t done, const std::string& detail) {
  auto now = std::chrono::steady_clock::now();
  int64_t decile = done * 10 / total_;
  if (tty_ && now - lastDraw_ < std::chrono::milliseconds(100) && done < total_) return;
  if (!tty_ && decile == lastDecile_ && done < total_) return;
  lastDraw_ = now;
  lastDecile_ = decile;
  double elapsed = std::chrono::duration<double>(now - start_).count();
  double eta = done > 0 ? elapsed * double(total_ - done) / double(done) : 0.0;
  constexpr int kWidth = 24;
  int filled = static_cast<int>(kWidth * done / total_);
  std::string bar = std::string(filled, '#') + std::string(kWidth - filled, '.');
  std::string line = fmt::format("{} [{}] {}/{} {} | ETA {}", label_, bar, done, total_, detail, formatDuration(eta));
  if (tty_)
    std::fprintf(stderr, "\r\033[K%s", line.c_str());
  else
    std::fprintf(stderr, "%s\n", line.c_str());
  std::fflush(stderr);
}

void ProgressBar::finish(const std::string& detail) {
  double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  std::string line = fmt::format("{} done in {} {}", label_, formatDuration(elapsed), detail);
  std::fprintf(stderr, tty_ ? "\r\033[K%s\n" : "%s\n", line.c_str());
  std::fflush(stderr);
}

}  // namespace xtrap
