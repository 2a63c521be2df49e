#pragma once
// Options with fixed choices: one table of names per option, which its parser checks against and
// its --help line is written from, so that --help lists exactly what is accepted.
#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

namespace xtrap {

// The names joined by `separator`: " | " in --help, ", " in an error's list of valid names.
inline std::string joinNames(const std::vector<std::string>& names, const std::string& separator = " | ") {
  std::string joined;
  for (const auto& n : names) joined += (joined.empty() ? "" : separator) + n;
  return joined;
}

// Throws std::invalid_argument "unknown WHAT 'name' (valid: a, b)" unless `name` is one of `names`.
inline void checkName(const std::vector<std::string>& names, const std::string& name, const std::string& what) {
  if (std::find(names.begin(), names.end(), name) == names.end())
    throw std::invalid_argument("unknown " + what + " '" + name + "' (valid: " + joinNames(names, ", ") + ")");
}

}  // namespace xtrap
