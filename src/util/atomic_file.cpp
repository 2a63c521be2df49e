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

std::filesystem::path fileOnPath(const std::filesystem::path& dir) {
  std::error_code ec;
  for (auto p = dir; !p.empty(); p = p.parent_path()) {
    if (std::filesystem::exists(p, ec) && !std::filesystem::is_directory(p, ec)) return p;
    if (p == p.parent_path()) break;
  }
  return {};
}

void requireWritableDirectoryFor(const std::filesystem::path& file) {
  auto parent = file.parent_path().empty() ? std::filesystem::path(".") : file.parent_path();
  if (auto blocker = fileOnPath(parent); !blocker.empty())
    throw std::runtime_error("cannot write " + file.string() + ": " + blocker.string() + " is not a directory");
  if (!std::filesystem::is_directory(parent))
    throw std::runtime_error("cannot write " + file.string() + ": directory " + parent.string() + " does not exist");
  if (::access(parent.c_str(), W_OK) != 0)
    throw std::runtime_error("cannot write " + file.string() + ": directory " + parent.string() + " is not writable (" +
                             std::strerror(errno) + ")");
}

namespace {
// The pid in a temporary's name "TARGET.tmp.PID" (or "TARGET.tmp.PID.EXT", e.g. gnuplot's script)
// when that process is gone; 0 when the name is no temporary or its writer still runs (say, an
// eval writing into this run).
pid_t deadWriter(const std::string& name) {
  size_t mark = name.rfind(".tmp.");
  while (mark != std::string::npos) {
    size_t end = name.find('.', mark + 5);
    std::string digits = name.substr(mark + 5, end == std::string::npos ? std::string::npos : end - mark - 5);
    if (!digits.empty() && digits.size() <= 10 && digits.find_first_not_of("0123456789") == std::string::npos) {
      auto pid = static_cast<pid_t>(std::stoll(digits));
      bool alive = pid == ::getpid() || ::kill(pid, 0) == 0 || errno == EPERM;
      return alive ? 0 : pid;
    }
    mark = mark == 0 ? std::string::npos : name.rfind(".tmp.", mark - 1);
  }
  return 0;
}

void removeIfStale(const std::filesystem::directory_entry& entry) {
  std::error_code ec;
  if (deadWriter(entry.path().filename().string()) != 0) std::filesystem::remove_all(entry.path(), ec);
}
}  // namespace

void removeStaleTemporaries(const std::filesystem::path& dir) {
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) removeIfStale(entry);
}

void removeStaleTemporariesOf(const std::filesystem::path& path) {
  auto parent = path.parent_path().empty() ? std::filesystem::path(".") : path.parent_path();
  std::string prefix = path.filename().string() + ".tmp.";
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(parent, ec))
    if (entry.path().filename().string().rfind(prefix, 0) == 0) removeIfStale(entry);
}

void writeFileAtomically(const std::filesystem::path& path, const std::function<void(std::ostream&)>& write) {
  removeStaleTemporariesOf(path);
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
