#pragma once
// RoBERTa-style masking as a pure function of (seed, absolute stream position): a token is
// selected with probability maskProb; a selected token becomes <mask> (80%), a random word (10%)
// or stays unchanged (10%). Being a function of the position (not of the window), evaluation at
// any Lvalid scores exactly the same tokens with the same corruptions.
#include <cstdint>

namespace xtrap {

enum class MaskAction { NotSelected, Mask, Random, Keep };

struct MaskChoice {
  MaskAction action = MaskAction::NotSelected;
  int32_t randomToken = 0;  // for MaskAction::Random: a word id in [0, wordCount)
};

// wordCount: ids [0, wordCount) are real words (the <mask> id is wordCount).
MaskChoice mlmMaskChoice(uint64_t seed, int64_t position, double maskProb, int64_t wordCount);

// Mixes a training step into a seed so every step draws fresh masks, reproducibly.
uint64_t stepMaskSeed(uint64_t seed, int64_t step);

}  // namespace xtrap
