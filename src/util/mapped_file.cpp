#include "util/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

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

void MappedFile::readFrom(uint64_t offset, const std::function<void(std::string_view)>& onBlock) const {
  std::vector<char> block(size_t(1) << 20);
  while (offset < size_) {
    ssize_t n = ::pread(fd_, block.data(), block.size(), static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw std::runtime_error("cannot read a mapped file: " + std::string(std::strerror(errno)));
    onBlock({block.data(), size_t(n)});
    offset += uint64_t(n);
  }
}

}  // namespace xtrap
