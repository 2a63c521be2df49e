#include "util/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <vector>

namespace xtrap {

MappedFile::MappedFile(const std::filesystem::path& path) {
  auto fail = [&](const char* what) {
    std::string reason = std::strerror(errno);
    if (fd_ >= 0) ::close(fd_);
    throw std::runtime_error("cannot " + std::string(what) + " " + path.string() + ": " + reason);
  };
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) fail("read");
  struct stat st {};
  if (::fstat(fd_, &st) != 0) fail("read");
  size_ = static_cast<size_t>(st.st_size);
  if (size_ == 0) return;  // mmap refuses length 0; an empty file is an empty view
  data_ = ::mmap(nullptr, size_, PROT_READ, MAP_SHARED, fd_, 0);
  if (data_ == MAP_FAILED) {
    data_ = nullptr;
    fail("map");
  }
}

MappedFile::~MappedFile() {
  if (data_) ::munmap(data_, size_);
  if (fd_ >= 0) ::close(fd_);
}

namespace {

// pread of up to `length` bytes at `offset`, retried on EINTR; at least one byte or an error.
size_t readSome(int fd, uint64_t offset, uint64_t length, char* out) {
  for (;;) {
    ssize_t n = ::pread(fd, out, length, static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0)
      throw std::runtime_error("cannot read a mapped file: " +
                               std::string(n == 0 ? "it shrank" : std::strerror(errno)));
    return size_t(n);
  }
}

}  // namespace

void MappedFile::readFrom(uint64_t offset, const std::function<void(std::string_view)>& onBlock) const {
  std::vector<char> block(size_t(1) << 20);
  while (offset < size_) {
    size_t n = readSome(fd_, offset, std::min<uint64_t>(block.size(), size_ - offset), block.data());
    onBlock({block.data(), n});
    offset += n;
  }
}

void MappedFile::read(uint64_t offset, uint64_t length, void* out) const {
  for (auto* dst = static_cast<char*>(out); length > 0;) {
    size_t n = readSome(fd_, offset, length, dst);
    dst += n;
    offset += n;
    length -= n;
  }
}

}  // namespace xtrap
