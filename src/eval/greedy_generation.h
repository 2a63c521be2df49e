#pragma once
// Greedy decoding with a KV cache (model/attention.h): what `eval --score generate` asks a
// decoder. The context is read in chunks of `chunk` positions (each one forward attending to the
// chunks before it, so memory grows with chunk x length, not length^2), then each new token is
// the argmax of the last position's logits and costs one position's forward, not a window's.
#include <cstdint>
#include <vector>

#include "model/transformer.h"

namespace xtrap {

struct Generation {
  std::vector<int32_t> tokens;   // the generated tokens, a stop token included
  std::vector<double> logProbs;  // log p of each, as the model gave it (nats)
};

// Generates up to maxNew tokens after `context` (not empty), stopping after a token of `stop`.
// The model's settings (interpolation) are those in force; it is put in eval mode.
Generation generateGreedy(Transformer& model, const std::vector<int32_t>& context, int64_t maxNew, int64_t chunk,
                          const std::vector<int32_t>& stop = {});

}  // namespace xtrap
