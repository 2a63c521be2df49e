#include "model/position/rope_scaling.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <tuple>

#include "util/choices.h"

namespace xtrap {

const std::vector<std::string>& RopeScaling::typeNames() {
  static const std::vector<std::string> names{"default", "linear", "dynamic", "yarn", "longrope", "llama3"};
  return names;
}

void RopeScaling::validate(int64_t rotaryDim) const {
  auto fail = [&](const std::string& why) { throw std::invalid_argument("rope_scaling " + type + ": " + why); };
  checkName(typeNames(), type, "rope_scaling type");
  if (rotaryDim < 2 || rotaryDim % 2)
    fail(fmt::format("needs an even number >= 2 of rotated channels, got {}", rotaryDim));
  if (isDefault()) return;
  bool scales = type != "longrope";  // longrope's factor only sets its attention factor
  if (scales && !(factor >= 1.0 && std::isfinite(factor))) fail(fmt::format("factor must be >= 1, got {}", factor));
  if (!scales && !(factor > 0.0 && std::isfinite(factor))) fail(fmt::format("factor must be > 0, got {}", factor));
  if (type == "linear") return;
  if (originalMaxPositions < 1)
    fail(type == "dynamic" ? "needs max_position_embeddings" : "needs original_max_position_embeddings");
  if (type == "dynamic" && rotaryDim == 2) fail("needs more than 2 rotated channels (base' has exponent d / (d - 2))");
  if (!(attentionFactor >= 0.0 && std::isfinite(attentionFactor)))
    fail(fmt::format("attention_factor must be > 0, got {}", attentionFactor));
  if (type == "yarn") {
    if (!(betaFast > 0 && betaSlow > 0 && std::isfinite(betaFast) && std::isfinite(betaSlow)))
      fail(fmt::format("beta_fast and beta_slow must be > 0, got {} and {}", betaFast, betaSlow));
    if (betaFast < betaSlow) fail(fmt::format("beta_fast {} must be >= beta_slow {}", betaFast, betaSlow));
    if (!(mscale >= 0 && mscaleAllDim >= 0 && std::isfinite(mscale) && std::isfinite(mscaleAllDim)))
      fail(fmt::format("mscale and mscale_all_dim must be >= 0, got {} and {}", mscale, mscaleAllDim));
    if (mscale > 0 && mscaleAllDim > 0 && 0.1 * mscaleAllDim * std::log(factor) + 1.0 <= 0.0)
      fail("mscale_all_dim makes the attention factor's denominator 0");
  }
  if (type == "longrope") {
    auto checkList = [&](const std::vector<double>& list, const char* name) {
      if (static_cast<int64_t>(list.size()) != rotaryDim / 2)
        fail(fmt::format("{} must have {} entries (rotated channels / 2), got {}", name, rotaryDim / 2, list.size()));
      for (double v : list)
        if (!(v > 0 && std::isfinite(v))) fail(fmt::format("{} entries must be > 0, got {}", name, v));
    };
    checkList(shortFactor, "short_factor");
    checkList(longFactor, "long_factor");
  }
  if (type == "llama3") {
    if (!(lowFreqFactor > 0 && std::isfinite(lowFreqFactor) && std::isfinite(highFreqFactor)))
      fail(fmt::format("low_freq_factor must be > 0, got {}", lowFreqFactor));
    if (!(lowFreqFactor < highFreqFactor))
      fail(fmt::format("low_freq_factor {} must be below high_freq_factor {}", lowFreqFactor, highFreqFactor));
  }
}

std::vector<double> ropeInverseFrequencies(const RopeScaling& s, double base, int64_t rotaryDim, int64_t seqLen) {
  const auto d = double(rotaryDim);
  const auto M = double(s.originalMaxPositions);
  if (s.type == "dynamic" && seqLen > s.originalMaxPositions)
    base *= std::pow(s.factor * double(seqLen) / M - (s.factor - 1.0), d / (d - 2.0));
  std::vector<double> inv(static_cast<size_t>(rotaryDim / 2));
  for (size_t i = 0; i < inv.size(); ++i) inv[i] = std::pow(base, -2.0 * double(i) / d);
  if (s.type == "linear") {
    for (double& v : inv) v /= s.factor;
  } else if (s.type == "yarn") {
    // The pair index (fractional) that turns b times over M.
    auto pairTurning = [&](double b) { return d * std::log(M / (b * 2.0 * M_PI)) / (2.0 * std::log(base)); };
    double lo = pairTurning(s.betaFast), hi = pairTurning(s.betaSlow);
    if (s.truncate) lo = std::floor(lo), hi = std::ceil(hi);
    lo = std::max(lo, 0.0), hi = std::min(hi, d - 1.0);
    if (lo == hi) hi += 0.001;  // transformers' guard against a ramp of zero width
    for (size_t i = 0; i < inv.size(); ++i) {
      double r = std::clamp((double(i) - lo) / (hi - lo), 0.0, 1.0);  // 1 = interpolated
      inv[i] = r * inv[i] / s.factor + (1.0 - r) * inv[i];
    }
  } else if (s.type == "longrope") {
    const std::vector<double>& e = seqLen > s.originalMaxPositions ? s.longFactor : s.shortFactor;
    for (size_t i = 0; i < inv.size(); ++i) inv[i] /= e[i];
  } else if (s.type == "llama3") {
    const double lowWavelength = M / s.lowFreqFactor, highWavelength = M / s.highFreqFactor;
    for (double& v : inv) {
      double wavelength = 2.0 * M_PI / v;
      if (wavelength > lowWavelength) {
        v /= s.factor;
      } else if (wavelength >= highWavelength) {
        double smooth = (M / wavelength - s.lowFreqFactor) / (s.highFreqFactor - s.lowFreqFactor);
        v = (1.0 - smooth) * v / s.factor + smooth * v;
      }
    }
  }
  return inv;
}

double ropeAttentionFactor(const RopeScaling& s) {
  if (s.type == "yarn") {
    if (s.attentionFactor > 0) return s.attentionFactor;
    auto mscale = [&](double m) { return s.factor <= 1.0 ? 1.0 : 0.1 * m * std::log(s.factor) + 1.0; };
    return s.mscale > 0 && s.mscaleAllDim > 0 ? mscale(s.mscale) / mscale(s.mscaleAllDim) : mscale(1.0);
  }
  if (s.type == "longrope") {
    if (s.attentionFactor > 0) return s.attentionFactor;
    return s.factor <= 1.0 ? 1.0 : std::sqrt(1.0 + std::log(s.factor) / std::log(double(s.originalMaxPositions)));
  }
  return 1.0;
}

bool operator==(const RopeScaling& a, const RopeScaling& b) {
  auto fields = [](const RopeScaling& s) {
    return std::tie(s.type, s.factor, s.originalMaxPositions, s.betaFast, s.betaSlow, s.mscale, s.mscaleAllDim,
                    s.attentionFactor, s.truncate, s.shortFactor, s.longFactor, s.lowFreqFactor, s.highFreqFactor);
  };
  return fields(a) == fields(b);
}

void to_json(nlohmann::json& j, const RopeScaling& s) {
  j = nlohmann::json{{"type", s.type},
                     {"factor", s.factor},
                     {"original_max_positions", s.originalMaxPositions},
                     {"beta_fast", s.betaFast},
                     {"beta_slow", s.betaSlow},
                     {"mscale", s.mscale},
                     {"mscale_all_dim", s.mscaleAllDim},
                     {"attention_factor", s.attentionFactor},
                     {"truncate", s.truncate},
                     {"short_factor", s.shortFactor},
                     {"long_factor", s.longFactor},
                     {"low_freq_factor", s.lowFreqFactor},
                     {"high_freq_factor", s.highFreqFactor}};
}

void from_json(const nlohmann::json& j, RopeScaling& s) {
  RopeScaling d;
  s.type = j.value("type", d.type);
  s.factor = j.value("factor", d.factor);
  s.originalMaxPositions = j.value("original_max_positions", d.originalMaxPositions);
  s.betaFast = j.value("beta_fast", d.betaFast);
  s.betaSlow = j.value("beta_slow", d.betaSlow);
  s.mscale = j.value("mscale", d.mscale);
  s.mscaleAllDim = j.value("mscale_all_dim", d.mscaleAllDim);
  s.attentionFactor = j.value("attention_factor", d.attentionFactor);
  s.truncate = j.value("truncate", d.truncate);
  s.shortFactor = j.value("short_factor", d.shortFactor);
  s.longFactor = j.value("long_factor", d.longFactor);
  s.lowFreqFactor = j.value("low_freq_factor", d.lowFreqFactor);
  s.highFreqFactor = j.value("high_freq_factor", d.highFreqFactor);
}

}  // namespace xtrap
