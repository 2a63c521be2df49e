#pragma once
// One writer per run directory: an exclusive flock(2) on RUN/.xtrap-lock, held for as long as the
// RunLock lives. The kernel drops it when the process dies however it dies (kill -9 included), so
// a stale lock never blocks a later --resume. The file holds the holder's pid for the message.
#include <filesystem>
#include <string>

namespace xtrap {

class RunLock {
 public:
  // Takes the lock of `dir` (which must exist) or throws a one-line error naming the directory
  // (as `what`: a run directory, a scenario's results directory) and the pid holding it.
  explicit RunLock(const std::filesystem::path& dir, const std::string& what = "run directory");
  ~RunLock();
  RunLock(const RunLock&) = delete;
  RunLock& operator=(const RunLock&) = delete;

 private:
  int fd_ = -1;
};

}  // namespace xtrap
