#include "train/init_from_run.h"

#include <fmt/format.h>

#include <fstream>
#include <stdexcept>

#include "util/fnv1a64.h"

namespace xtrap {

ModelConfig adaptedModelConfig(const ModelConfig& source, int64_t L, Interp interp, double a) {
  const std::string what = "--init with --interp " + interpName(interp);
  if (isDynamic(interp))
    throw std::invalid_argument(what +
                                ": a dynamic interpolation changes a with each window's length; an adapted "
                                "run bakes one fixed factor (linear, ntk or yarn)");
  if (interp != Interp::None && !(a >= 1)) throw std::invalid_argument(what + ": the factor must be >= 1");
  ModelConfig m = source;
  m.contextLength = L;
  PositionMethod pos = source.position();
  if (pos == PositionMethod::Learned && source.positionTableSize() < L)
    throw std::invalid_argument(fmt::format(
        "--init: the source's learned position table has {} rows, fewer than --L {}", source.positionTableSize(), L));
  if (pos == PositionMethod::Learned && source.maxPositions == 0) m.maxPositions = source.contextLength;
  if (interp == Interp::None) return m;
  if (pos == PositionMethod::Rotary) {
    if (!source.ropeScaling.isDefault())
      throw std::invalid_argument(what + ": the source already has " + source.ropeScaling.type +
                                  " rope scaling; adapt it with --interp none");
    if (interp == Interp::Ntk) {
      m.rotaryBase = rotaryInterpolation(interp, a, source.rotaryBase, source.rotaryDim(), source.contextLength).base;
    } else {
      m.ropeScaling.type = interpName(interp);  // linear | yarn
      m.ropeScaling.factor = a;
      if (interp == Interp::Yarn) m.ropeScaling.originalMaxPositions = source.contextLength;
    }
  } else if (isLinearBias(pos)) {
    if (isYarn(interp)) throw std::invalid_argument(what + ": yarn applies to rotary, not " + source.pos);
    if (source.alibiInterp != "none")
      throw std::invalid_argument(what + ": the source's slopes are already interpolated (" + source.alibiInterp +
                                  "); adapt it with --interp none");
    m.alibiInterp = interpName(interp);
    m.alibiInterpFactor = a;
  } else {
    throw std::invalid_argument(what + ": applies to ALiBi-family and rotary methods, not " + source.pos +
                                " (use --interp none)");
  }
  m.validate();  // learned slopes are refused here
  return m;
}

RunInfo readInitSource(const std::filesystem::path& dir) {
  RunInfo run = readRunInfo(dir);
  if (!run.pretrained.empty())
    throw std::invalid_argument("--init " + dir.string() +
                                ": a pretrained directory (its tokenizer is not a WikiText word vocabulary); --init "
                                "takes an xtrap run");
  if (!std::filesystem::exists(checkpointPath(dir)))
    throw std::invalid_argument("--init " + dir.string() + ": no checkpoint.pt (the run has not saved a step)");
  return run;
}

std::string checkpointDigest(const RunInfo& source) {
  std::ifstream in(checkpointPath(source.dir), std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + checkpointPath(source.dir).string());
  uint64_t h = kFnv1a64Basis;
  std::string chunk(size_t(1) << 20, '\0');
  while (in.read(chunk.data(), std::streamsize(chunk.size())) || in.gcount() > 0)
    h = fnv1a64(std::string_view(chunk.data(), size_t(in.gcount())), h);
  return fmt::format("{:016x}", h);
}

void copySourceWeights(Transformer& model, Transformer& source) {
  torch::NoGradGuard noGrad;
  auto fixedSlope = [](const std::string& name) {
    return name == "linear_bias.slope_past" || name == "linear_bias.slope_future";
  };
  auto from = source->named_parameters(), fromBuffers = source->named_buffers();
  for (auto& p : model->named_parameters()) p.value().copy_(from[p.key()]);
  for (auto& b : model->named_buffers())
    if (!fixedSlope(b.key())) b.value().copy_(fromBuffers[b.key()]);
}

}  // namespace xtrap
