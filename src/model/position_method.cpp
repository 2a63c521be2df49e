#include "model/position_method.h"

#include <stdexcept>

#include "util/choices.h"

namespace xtrap {
namespace {
const std::vector<std::pair<std::string, PositionMethod>>& table() {
  static const std::vector<std::pair<std::string, PositionMethod>> t = {
      {"none", PositionMethod::None},
      {"sinusoidal", PositionMethod::Sinusoidal},
      {"learned", PositionMethod::Learned},
      {"rotary", PositionMethod::Rotary},
      {"t5", PositionMethod::T5},
      {"alibi", PositionMethod::Alibi},
      {"alibi-offset", PositionMethod::AlibiOffset},
      {"alibi-onesided", PositionMethod::AlibiOneSided},
      {"alibi-learned", PositionMethod::AlibiLearned},
      {"bialibi", PositionMethod::BiAlibi},
      {"kerple-log", PositionMethod::KerpleLog},
      {"fire", PositionMethod::Fire},
  };
  return t;
}
}  // namespace

PositionMethod parsePositionMethod(const std::string& name) {
  for (const auto& [n, m] : table())
    if (n == name) return m;
  checkName(positionMethodNames(), name, "position method");
  throw std::logic_error("position method table and names disagree");
}

std::string positionMethodName(PositionMethod m) {
  for (const auto& [n, mm] : table())
    if (mm == m) return n;
  throw std::logic_error("unnamed position method");
}

const std::vector<std::string>& positionMethodNames() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    for (const auto& [n, m] : table()) v.push_back(n);
    return v;
  }();
  return names;
}

bool isLinearBias(PositionMethod m) {
  return m == PositionMethod::Alibi || m == PositionMethod::AlibiOffset || m == PositionMethod::AlibiOneSided ||
         m == PositionMethod::AlibiLearned || m == PositionMethod::BiAlibi;
}

}  // namespace xtrap
