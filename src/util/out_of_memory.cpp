#include "util/out_of_memory.h"

#include <c10/util/Exception.h>

#include <regex>

namespace xtrap {

std::string failedAllocation(const std::exception& error) {
  const auto* c10error = dynamic_cast<const c10::Error*>(&error);
  if (!c10error) return {};
  const std::string message = c10error->what_without_backtrace();
  bool cuda = dynamic_cast<const c10::OutOfMemoryError*>(&error) != nullptr;
  bool cpu = message.find("DefaultCPUAllocator: can't allocate memory") != std::string::npos ||
             message.find("DefaultCPUAllocator: not enough memory") != std::string::npos;
  if (!cuda && !cpu) return {};
  // CUDA: "Tried to allocate 4.00 GiB."; CPU: "you tried to allocate 228065280 bytes."
  static const std::regex amount(R"([Tt]ried to allocate ([0-9.]+ (?:bytes|[KMGTP]i?B)))");
  std::smatch match;
  return std::regex_search(message, match, amount) ? match[1].str() : "an allocation";
}

}  // namespace xtrap
