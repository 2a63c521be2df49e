#pragma once
// The parameters a ModelConfig's transformer has, by name, with their shapes, without building it
// (the pretrained loader checks a checkpoint against them before allocating anything). Torch-free.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "model/model_config.h"

namespace xtrap {

std::map<std::string, std::vector<int64_t>> parameterShapes(const ModelConfig& c);

}  // namespace xtrap
