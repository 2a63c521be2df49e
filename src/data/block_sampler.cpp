#include "data/block_sampler.h"

#include <algorithm>
#include <sstream>
#include <stdexcept>

namespace xtrap {

BlockSampler::BlockSampler(int64_t streamLength, int64_t span, bool contiguous, uint64_t seed)
    : streamLength_(streamLength), span_(span), contiguous_(contiguous), rng_(seed) {
  if (streamLength < span)
    throw std::invalid_argument("the train split has " + std::to_string(streamLength) +
                                " tokens, fewer than one sequence of " + std::to_string(span));
  if (contiguous_) reshuffle();
}

void BlockSampler::reshuffle() {
  order_.resize(static_cast<size_t>(streamLength_ / span_));
  for (size_t i = 0; i < order_.size(); ++i) order_[i] = static_cast<int64_t>(i);
  std::shuffle(order_.begin(), order_.end(), rng_);
  cursor_ = 0;
}

std::vector<int64_t> BlockSampler::next(int64_t count) {
  std::vector<int64_t> starts(static_cast<size_t>(count));
  std::uniform_int_distribution<int64_t> uniform(0, streamLength_ - span_);
  for (auto& s : starts) {
    if (!contiguous_) {
      s = uniform(rng_);
      continue;
    }
    if (cursor_ == order_.size()) reshuffle();
    s = order_[cursor_++] * span_;
  }
  return starts;
}

std::string BlockSampler::state() const {
  // The generator, and for contiguous order this epoch's permutation and position in it.
  std::ostringstream out;
  out << rng_ << ' ' << cursor_ << ' ' << order_.size();
  for (int64_t b : order_) out << ' ' << b;
  return out.str();
}

void BlockSampler::restore(const std::string& state) {
  std::istringstream in(state);
  size_t cursor = 0, n = 0;
  in >> rng_ >> cursor >> n;
  if (!in || n != order_.size() || cursor > n)
    throw std::runtime_error("checkpoint data-order state does not match this data and --L");
  for (auto& b : order_) in >> b;
  if (!in) throw std::runtime_error("checkpoint data-order state is truncated");
  cursor_ = cursor;
}

}  // namespace xtrap
