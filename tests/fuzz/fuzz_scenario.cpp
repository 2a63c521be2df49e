// libFuzzer: scenario (TOML) parser. Arbitrary text must either throw std::invalid_argument or give a scenario with at
// least one uniquely named variant, at least one eval block whose variant selection is non-empty, and sorted lengths.
// Errors must be one line that starts with the source name (`xtrap run` prints them as they are).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <stdexcept>
#include <string>

#include "scenario/scenario.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  xtrap::Scenario s;
  try {
    s = xtrap::parseScenario(text, "fuzz.toml", "/nonexistent-base");
  } catch (const std::invalid_argument& e) {
    std::string message = e.what();
    if (message.rfind("fuzz.toml", 0) != 0 || message.find('\n') != std::string::npos) {
      std::fprintf(stderr, "not a one-line error naming the source: %s\n", message.c_str());
      std::abort();
    }
    return 0;
  }
  if (s.variants.empty() || s.evals.empty()) std::abort();
  std::set<std::string> names;
  for (const auto& v : s.variants)
    if (v.name.empty() || !names.insert(v.name).second) std::abort();
  for (const auto& e : s.evals) {
    if (e.lvalids.empty() || s.select(e.variants).empty()) std::abort();
    for (size_t i = 1; i < e.lvalids.size(); ++i)
      if (e.lvalids[i] <= e.lvalids[i - 1]) std::abort();
  }
  return 0;
}
