#pragma once
// RoBERTa/fairseq masked-LM corruption, reproducible from seeds alone.
//  - Selection: of n candidate tokens exactly int(p*n + u) are selected, u ~ U[0, 1) (so the
//    expected count is p*n), uniformly without replacement (fairseq's MaskTokensDataset).
//      training: per sequence, n = its words (never <bos>), from (step seed, sequence index);
//      evaluation: per aligned block of the stream, [k*B, min((k+1)*B, N)) with B = kEvalMaskBlock,
//        from (seed, k). The masked set is then a function of (seed, absolute position) alone:
//        every encoder (with or without <bos>, any L), every Lvalid and every stride scores the
//        same tokens.
//  - Corruption of a selected token, from (seed, absolute position): <mask> (80%), a random real
//    word (10%: uniform over the data's words, never <unk>, <eos>, <mask>, <bos>), unchanged (10%).
#include <cstdint>
#include <vector>

namespace xtrap {

// The ids masking needs: <mask>, <bos> (-1: the encoder prepends none) and the real words a
// selected token may be replaced by; a pretrained encoder's windows also end in eosId ([SEP],
// </s>; -1: none) and begin with its [CLS] / <s> as bosId.
struct MlmTokens {
  int64_t maskId = -1;
  int64_t bosId = -1;
  std::vector<int32_t> replacementWords;
  int64_t eosId = -1;
  int64_t bosColumns() const { return bosId >= 0 ? 1 : 0; }
  int64_t frameColumns() const { return bosColumns() + (eosId >= 0 ? 1 : 0); }  // a window's non-word positions
};

enum class MaskAction { Mask, Random, Keep };

struct MaskChoice {
  MaskAction action = MaskAction::Mask;
  int32_t randomToken = -1;  // for MaskAction::Random: one of the replacement words
};

// Evaluation masking: exact counts over aligned blocks of 64 stream tokens (fairseq's exact count
// per sequence, at a granularity no model setting changes), from a fixed seed rather than the
// run's training seed, so runs of different seeds are scored on the same tokens too.
constexpr int64_t kEvalMaskBlock = 64;
constexpr uint64_t kEvalMaskSeed = 1;

// The sorted offsets in [0, n) selected among n tokens: int(maskProb * n + u) of them.
std::vector<int64_t> exactCountSelection(uint64_t seed, int64_t n, double maskProb);

// The sorted absolute positions in [begin, end) selected in a stream of streamLength tokens cut
// into aligned blocks of `block` tokens, each with its exact count.
std::vector<int64_t> alignedBlockSelection(uint64_t seed, double maskProb, int64_t block, int64_t streamLength,
                                           int64_t begin, int64_t end);

// How the selected token at absolute `position` is corrupted; replacementWords must not be empty.
MaskChoice mlmCorruption(uint64_t seed, int64_t position, const std::vector<int32_t>& replacementWords);

// Mixes a training step into a seed so every step draws fresh masks, reproducibly.
uint64_t stepMaskSeed(uint64_t seed, int64_t step);
// The selection seed of sequence `index` of a training step.
uint64_t sequenceMaskSeed(uint64_t stepSeed, int64_t index);

}  // namespace xtrap
