// libFuzzer: config.json of a pretrained directory (run/pretrained_config.h, the family files of
// run/families/). Any input must either be rejected with std::runtime_error (one line) or yield a
// ModelConfig that validates and whose parameter shapes are all positive.
#include <cstdint>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

#include "model/parameter_shapes.h"
#include "run/pretrained_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  nlohmann::json j = nlohmann::json::parse(data, data + size, nullptr, false);
  if (j.is_discarded()) return 0;
  try {
    xtrap::PretrainedConfig p = xtrap::parsePretrainedConfig(j, "fuzz/config.json");
    p.model.validate();  // throws std::invalid_argument: a config the parser let through
    // Hostile sizes are allowed through only as far as shapes: a model is never built here.
    for (const auto& [name, shape] : xtrap::parameterShapes(p.model))
      for (int64_t d : shape)
        if (d < 1) std::abort();
  } catch (const std::runtime_error& e) {
    if (std::string(e.what()).find('\n') != std::string::npos) std::abort();
  }
  return 0;
}
