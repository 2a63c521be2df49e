#include "bias_dump.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "model/position/fire_bias.h"
#include "model/position/kerple_bias.h"
#include "util/execution_context.h"
#include "util/hdf5_writer.h"

namespace xtrap {

torch::Tensor attentionBiasMatrix(Transformer& model, int64_t len) {
  torch::NoGradGuard noGrad;
  auto onModel = torch::TensorOptions().dtype(torch::kFloat32).device(model->device());
  auto b = attentionBiasBlock(model->attentionBias(), model->config.causal(), 0, len, 0, len, onModel);
  auto full = torch::zeros({model->config.heads, len, len});  // on the host: the HDF5 writer reads it
  return b.defined() ? (full + toHost(b)).contiguous() : full;
}

void dumpBias(Transformer& model, int64_t len, const std::filesystem::path& file,
              const BiasDumpInterpolation& interpolation) {
  auto bias = attentionBiasMatrix(model, len);
  int64_t H = bias.size(0);
  Hdf5Writer h5(file);
  h5.attribute("arch", model->config.arch);
  h5.attribute("pos", model->config.pos);
  h5.attribute("len", len);
  h5.attribute("model_config", nlohmann::json(model->config).dump());
  h5.attribute("interp", interpolation.interp);
  h5.attribute("scale", interpolation.scale);
  h5.attribute("slopes", interpolation.slopes);
  h5.floats("bias", {hsize_t(H), hsize_t(len), hsize_t(len)}, bias.data_ptr<float>());
  torch::NoGradGuard noGrad;
  auto write = [&](const std::string& name, const torch::Tensor& values) {  // on the model's device or the host
    auto t = toHost(values).to(torch::kFloat32);
    h5.floats(name, {hsize_t(t.numel())}, t.data_ptr<float>());
  };
  if (LinearBias* lb = model->linearBias()) {
    const LinearBiasSpec& spec = lb->spec();
    write("slope_past", lb->slopePast());
    write("slope_future", lb->slopeFuture());
    write("future_shift", torch::full({H}, spec.futureShift));
    std::vector<float> bp(spec.blockPast.begin(), spec.blockPast.end()),
        bf(spec.blockFuture.begin(), spec.blockFuture.end());
    write("block_past", torch::tensor(bp));
    write("block_future", torch::tensor(bf));
    write("first_token_bias", spec.hasFirstTokenBias ? lb->firstTokenBias() : torch::zeros({H}));
  }
  if (auto* kerple = dynamic_cast<KerpleLogBias*>(model->attentionBias())) {
    write("r1", kerple->r1());
    write("r2", kerple->r2());
  }
  if (auto* fire = dynamic_cast<FireBias*>(model->attentionBias())) {
    write("c", fire->c());
    write("threshold", fire->threshold());
  }
  h5.commit();
}

std::string formatBiasMatrix(const torch::Tensor& bias) {
  std::string out;
  auto b = toHost(bias).to(torch::kFloat64);
  auto a = b.accessor<double, 3>();
  for (int64_t h = 0; h < b.size(0); ++h) {
    out += fmt::format("head {}\n", h);
    for (int64_t i = 0; i < b.size(1); ++i) {
      for (int64_t j = 0; j < b.size(2); ++j) {
        double v = a[h][i][j];
        out += std::isinf(v) ? fmt::format("{:>10}", "-inf") : fmt::format("{:>10.4g}", v == 0 ? 0.0 : v);
      }
      out += "\n";
    }
  }
  return out;
}

}  // namespace xtrap
