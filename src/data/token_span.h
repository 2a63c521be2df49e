#pragma once
// A read-only view of token ids: a split of the memory-mapped token cache (token_cache.h), or a
// std::vector a caller owns. Passing views instead of vectors is what lets every rank and every
// process read one corpus from the page cache without a copy of its own.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "util/mapped_file.h"

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
  TokenSpan subspan(size_t offset, size_t count) const {
    TokenSpan s{data_ + offset, count};
    return file_ ? s.readingThrough(file_, fileOffset_ + offset * sizeof(int32_t)) : s;
  }
  std::vector<int32_t> toVector() const { return {begin(), end()}; }

  // The same view, whose copy() reads `file` (which maps these ids at byte `fileOffset`) with
  // pread. Training copies a few short windows a step from all over its split: read through the
  // mapping, every page they touch would stay mapped in this process (on kernels that map file
  // pages in 2 MiB folios, about 1 MiB per window), its resident memory growing by the whole
  // split over an epoch; read with pread, the pages sit in the page cache, shared, and are not
  // this process's.
  TokenSpan readingThrough(const MappedFile* file, uint64_t fileOffset) const {
    TokenSpan s = *this;
    s.file_ = file;
    s.fileOffset_ = fileOffset;
    return s;
  }
  // ids [offset, offset + count) into out.
  void copy(size_t offset, size_t count, int32_t* out) const {
    if (file_)
      file_->read(fileOffset_ + offset * sizeof(int32_t), count * sizeof(int32_t), out);
    else
      std::memcpy(out, data_ + offset, count * sizeof(int32_t));
  }

  friend bool operator==(const TokenSpan& a, const TokenSpan& b);
  friend bool operator!=(const TokenSpan& a, const TokenSpan& b) { return !(a == b); }

 private:
  const int32_t* data_ = nullptr;
  size_t size_ = 0;
  const MappedFile* file_ = nullptr;  // or nothing: copy() reads data_
  uint64_t fileOffset_ = 0;
};

// Same ids in the same order (not the same memory).
inline bool operator==(const TokenSpan& a, const TokenSpan& b) {
  if (a.size_ != b.size_) return false;
  for (size_t i = 0; i < a.size_; ++i)
    if (a.data_[i] != b.data_[i]) return false;
  return true;
}

}  // namespace xtrap
