#pragma once
// Learning rate at a step: linear warmup, then cosine decay to lr * minLrRatio at the last step,
// or inverse square root (fairseq's inverse_sqrt: lr * sqrt(warmup / step) after warmup), or
// constant (position interpolation's and YaRN's fine-tuning: lr after warmup).
#include <cstdint>

#include "run/train_config.h"

namespace xtrap {

double learningRate(const TrainConfig& c, int64_t step, int64_t totalSteps);  // step is 0-based

}  // namespace xtrap
