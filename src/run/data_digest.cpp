#include "run/data_digest.h"

#include <fmt/format.h>

namespace xtrap {

std::string dataChangedWarning(const std::string& runDir, const std::string& dataDir, const std::string& recorded,
                               const std::string& current) {
  if (recorded.empty() || recorded == current) return "";
  return fmt::format("the data in {} changed since run {} was trained (data digest {} in run.json, {} now)", dataDir,
                     runDir, recorded, current);
}

}  // namespace xtrap
