#include "util/atomic_file.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace xtrap {

std::filesystem::path temporarySibling(const std::filesystem::path& path) {
  auto tmp = path;
  tmp += ".tmp." + std::to_string(::getpid());
  return tmp;
}

void commitTemporary(const std::filesystem::path& tmp, const std::filesystem::path& path) {
  int fd = ::open(tmp.c_str(), O_RDONLY);
  bool ok = fd >= 0 && ::fsync(fd) == 0;
  if (fd >= 0) ::close(fd);
  if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::string why = std::strerror(errno);
    std::error_code ignored;
    std::filesystem::remove(tmp, ignored);
    throw std::runtime_error("cannot write " + path.string() + ": " + why);
  }
  // Make the rename itself durable: without this a power loss may bring back the old name.
  auto parent = path.parent_path().empty() ? std::filesystem::path(".") : path.parent_path();
  int dirFd = ::open(parent.c_str(), O_RDONLY | O_DIRECTORY);
  if (dirFd >= 0) {
    ::fsync(dirFd);
    ::close(dirFd);
  }
}

void requireWritableDirectoryFor(const std::filesystem::path& file) {
  auto parent = file.parent_path().empty() ? std::filesystem::path(".") : file.parent_path();
  if (!std::filesystem::is_directory(parent))
    throw std::runtime_error("cannot write " + file.string() + ": directory " + parent.string() + " does not exist");
  if (::access(parent.c_str(), W_OK) != 0)
    throw std::runtime_error("cannot write " + file.string() + ": directory " + parent.string() + " is not writable (" +
                             std::strerror(errno) + ")");
}

void removeStaleTemporaries(const std::filesystem::path& dir) {
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    std::string name = entry.path().filename().string();
    size_t mark = name.rfind(".tmp.");
    if (mark == std::string::npos || mark + 5 == name.size() || name.size() - mark > 15 ||
        name.find_first_not_of("0123456789", mark + 5) != std::string::npos)
      continue;
    // A temporary of a live process (say, an eval writing into this run) is still being written.
    auto pid = static_cast<pid_t>(std::stoll(name.substr(mark + 5)));
    bool alive = ::kill(pid, 0) == 0 || errno == EPERM;
    if (!alive && entry.is_regular_file(ec)) std::filesystem::remove(entry.path(), ec);
  }
}

void writeFileAtomically(const std::filesystem::path& path, const std::function<void(std::ostream&)>& write) {
  auto tmp = temporarySibling(path);
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw std::runtime_error("cannot write " + path.string() + ": " + std::strerror(errno));
    try {
      write(out);
      out.flush();
    } catch (...) {
      out.close();
      std::error_code ignored;
      std::filesystem::remove(tmp, ignored);
      throw;
    }
    if (!out) {
      std::string why = std::strerror(errno);
      out.close();
      std::error_code ignored;
      std::filesystem::remove(tmp, ignored);
      throw std::runtime_error("cannot write " + path.string() + ": " + why);
    }
  }
  commitTemporary(tmp, path);
}

void writeTextAtomically(const std::filesystem::path& path, const std::string& text) {
  writeFileAtomically(path, [&](std::ostream& out) { out << text; });
}

std::string readTextFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path.string() + ": " + std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace xtrap
