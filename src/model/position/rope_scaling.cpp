#include "model/position/rope_scaling.h"

namespace xtrap {

const std::vector<std::string>& RopeScaling::typeNames() {
  static const std::vector<std::string> names{"default", "linear", "dynamic", "yarn", "longrope", "llama3"};
  return names;
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
