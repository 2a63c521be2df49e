#pragma once
// A whole file mapped read-only (POSIX mmap, MAP_SHARED): its pages live once in the page cache,
// shared by every process that maps the same file, and are read from disk only when touched.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string_view>

namespace xtrap {

class MappedFile {
 public:
  // Throws std::runtime_error naming the file when it cannot be opened or mapped.
  explicit MappedFile(const std::filesystem::path& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  std::string_view bytes() const { return {static_cast<const char*>(data_), size_}; }
  // Calls onBlock on bytes [offset, size) in order, in blocks of 1 MiB read with pread, not
  // through the mapping: checking a whole file leaves the mapped pages untouched, so they count
  // towards this process's resident memory only once a reader actually uses them.
  void readFrom(uint64_t offset, const std::function<void(std::string_view)>& onBlock) const;
  // Copies bytes [offset, offset + length) into `out` with pread, not through the mapping (the
  // pages read do not become resident in this process; see TokenSpan::copy).
  void read(uint64_t offset, uint64_t length, void* out) const;

 private:
  int fd_ = -1;
  void* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace xtrap
