#pragma once
// Where each training sequence starts in the train stream: uniformly random starts, or
// consecutive L-token blocks visited in a shuffled order each epoch. The generator state is part
// of the checkpoint so a resumed run sees the same data order.
#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace xtrap {

class BlockSampler {
 public:
  // Sequences of `span` tokens (L + 1 for decoders: inputs and shifted targets) from a stream
  // of `streamLength` tokens.
  BlockSampler(int64_t streamLength, int64_t span, bool contiguous, uint64_t seed);
  std::vector<int64_t> next(int64_t count);  // start offsets

  std::string state() const;  // serialised generator + epoch position
  void restore(const std::string& state);

 private:
  void reshuffle();
  int64_t streamLength_, span_;
  bool contiguous_;
  std::mt19937_64 rng_;
  std::vector<int64_t> order_;  // contiguous: block indices of this epoch
  size_t cursor_ = 0;
};

}  // namespace xtrap
