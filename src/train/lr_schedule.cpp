#include "train/lr_schedule.h"

#include <algorithm>
#include <cmath>

namespace xtrap {

double learningRate(const TrainConfig& c, int64_t step, int64_t totalSteps) {
  double s = static_cast<double>(step + 1);
  double warmup = static_cast<double>(c.warmupSteps);
  if (s <= warmup) return c.lr * s / warmup;
  if (c.schedule == "constant") return c.lr;
  if (c.schedule == "inverse-sqrt") return c.lr * std::sqrt(std::max(warmup, 1.0) / s);
  double span = std::max(1.0, static_cast<double>(totalSteps) - warmup);
  double progress = std::min(1.0, (s - warmup) / span);
  double minLr = c.lr * c.minLrRatio;
  return minLr + 0.5 * (c.lr - minLr) * (1.0 + std::cos(M_PI * progress));
}

}  // namespace xtrap
