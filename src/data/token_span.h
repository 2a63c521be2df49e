#pragma once
// A read-only view of token ids: a split of the memory-mapped token cache (token_cache.h), or a
// std::vector a caller owns. Passing views instead of vectors is what lets every rank and every
// process read one corpus from the page cache without a copy of its own.
#include <cstddef>
#include <cstdint>
#include <vector>

namespace xtrap {

class TokenSpan {
 public:
  TokenSpan() = default;
  TokenSpan(const int32_t* data, size_t size) : data_(data), size_(size) {}
  // Implicit on purpose: functions taking a TokenSpan accept the vectors tests and tools build.
  TokenSpan(const std::vector<int32_t>& ids) : data_(ids.data()), size_(ids.size()) {}  // NOLINT

  const int32_t* data() const { return data_; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  const int32_t* begin() const { return data_; }
  const int32_t* end() const { return data_ + size_; }
  int32_t operator[](size_t i) const { return data_[i]; }
  int32_t front() const { return data_[0]; }
  int32_t back() const { return data_[size_ - 1]; }
  TokenSpan subspan(size_t offset, size_t count) const { return {data_ + offset, count}; }
  std::vector<int32_t> toVector() const { return {begin(), end()}; }

  friend bool operator==(const TokenSpan& a, const TokenSpan& b);
  friend bool operator!=(const TokenSpan& a, const TokenSpan& b) { return !(a == b); }

 private:
  const int32_t* data_ = nullptr;
  size_t size_ = 0;
};

// Same ids in the same order (not the same memory).
inline bool operator==(const TokenSpan& a, const TokenSpan& b) {
  if (a.size_ != b.size_) return false;
  for (size_t i = 0; i < a.size_; ++i)
    if (a.data_[i] != b.data_[i]) return false;
  return true;
}

}  // namespace xtrap
