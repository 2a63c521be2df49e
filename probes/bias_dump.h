#pragma once
// Bias dump: the additive attention bias of a model's position method as HDF5 dataset `bias`
// float32 [H, len, len] (-inf where blocked, causal mask included for decoders), plus the
// per-head parameters of ALiBi-family specs (slope_past, slope_future, future_shift,
// block_past, block_future, first_token_bias), KERPLE's (r1, r2) and FIRE's (c, threshold).
#include <torch/torch.h>

#include <filesystem>
#include <string>

#include "model/transformer.h"

namespace xtrap {

torch::Tensor attentionBiasMatrix(Transformer& model, int64_t len);  // (H, len, len) float32 on the host
// The interpolation the model's slopes / rotary settings were set to (attributes interp,
// scale, slopes of the file).
struct BiasDumpInterpolation {
  std::string interp = "none";
  double scale = 1.0;
  std::string slopes;
};
void dumpBias(Transformer& model, int64_t len, const std::filesystem::path& file,
              const BiasDumpInterpolation& interpolation = {});
std::string formatBiasMatrix(const torch::Tensor& bias);  // per head, for --print

}  // namespace xtrap
