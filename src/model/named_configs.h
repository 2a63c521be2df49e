#pragma once
// Named model configurations usable wherever a config is given (--config NAME, scenario files):
// the four encoder set-ups of the "MLM with ALiBi and CLAP head" experiments.
//   baseline      encoder, learned positions + RoBERTa head
//   learned-clap  encoder, learned positions + CLAP head
//   alibi         encoder, alibi-offset + RoBERTa head
//   zero-clap     encoder, alibi-offset + CLAP head
#include <string>
#include <vector>

#include "model/model_config.h"

namespace xtrap {

void applyNamedConfig(const std::string& name, ModelConfig& c);  // throws listing valid names
const std::vector<std::string>& namedConfigNames();

}  // namespace xtrap
