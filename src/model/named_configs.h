#pragma once
// Named model configurations usable wherever a config is given (--config NAME, scenario files).
// The four encoder set-ups of the "MLM with ALiBi and CLAP head" experiments:
//   baseline      encoder, learned positions + RoBERTa head
//   learned-clap  encoder, learned positions + CLAP head
//   alibi         encoder, alibi-offset + RoBERTa head
//   zero-clap     encoder, alibi-offset + CLAP head
// and the WikiText-103 language model of Baevski & Auli (2019) that Press et al. (2022) train with
// ALiBi (fairseq's transformer_lm_wiki103):
//   paper-wt103   decoder, alibi, L=512, 16 pre-LN blocks, d=1024, 8 heads, FFN 4096, ReLU, no
//                 final LayerNorm, dropout 0.3 (attention 0.1, activation 0.1), adaptive softmax
//                 with cutoffs 20000,60000 (dropout 0.2) and adaptive input tied to it.
// Explicit settings win over a named config's: applyNamedConfig leaves alone every field whose
// flag `given` reports (e.g. `--config paper-wt103 --d-model 256 --layers 2`).
#include <functional>
#include <string>
#include <vector>

#include "model/model_config.h"

namespace xtrap {

using FlagGiven = std::function<bool(const std::string& flag)>;

// Throws listing valid names.
void applyNamedConfig(const std::string& name, ModelConfig& c, const FlagGiven& given = {});
const std::vector<std::string>& namedConfigNames();
const std::vector<std::string>& encoderSeedConfigNames();  // the four encoder set-ups
// Whether the config is one of the encoder set-ups, which are their position method and head:
// --arch, --pos and --head contradict them.
bool namedConfigFixesPositionAndHead(const std::string& name);

}  // namespace xtrap
