#include "run/run_lock.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>

namespace xtrap {

RunLock::RunLock(const std::filesystem::path& dir, const std::string& what) {
  auto cannotLock = [&](int error) {
    return std::runtime_error(fmt::format("cannot lock {} {}: {}", what, dir.string(), std::strerror(error)));
  };
  auto file = dir / ".xtrap-lock";
  // O_CLOEXEC: a child (gnuplot, a rank) must not keep the lock past this process.
  fd_ = ::open(file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) throw cannotLock(errno);
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    int error = errno;
    char buffer[32] = {};
    ssize_t n = ::pread(fd_, buffer, sizeof(buffer) - 1, 0);
    ::close(fd_);
    std::string holder = n > 0 ? std::string(buffer, size_t(n)) : std::string();
    holder = holder.substr(0, holder.find_first_not_of("0123456789"));
    if (error != EWOULDBLOCK) throw cannotLock(error);
    throw std::runtime_error(fmt::format("{} {} is in use by {} (one writer per run)", what, dir.string(),
                                         holder.empty() ? std::string("another process") : "process " + holder));
  }
  std::string pid = std::to_string(::getpid()) + "\n";
  // The pid is only for the message above: failing to write it does not weaken the lock.
  [[maybe_unused]] bool written = ::ftruncate(fd_, 0) == 0 && ::pwrite(fd_, pid.data(), pid.size(), 0) > 0;
}

RunLock::~RunLock() { ::close(fd_); }  // releases the flock

}  // namespace xtrap
