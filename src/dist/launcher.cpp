#include "dist/launcher.h"

#include <fmt/format.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <vector>

#include "dist/dist_group.h"
#include "util/interrupt.h"

namespace xtrap {

namespace {

constexpr std::chrono::seconds kLaunchGrace{90};  // > the ranks' own failure detection

std::vector<std::string> ownArguments() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> args;
  for (size_t begin = 0; begin < all.size();) {
    size_t end = all.find('\0', begin);
    if (end == std::string::npos) end = all.size();
    args.push_back(all.substr(begin, end - begin));
    begin = end + 1;
  }
  return args;
}

std::string describeStatus(int status) {
  if (WIFSIGNALED(status))
    return fmt::format("was killed by signal {} ({})", WTERMSIG(status), strsignal(WTERMSIG(status)));
  return fmt::format("exited with status {}", WEXITSTATUS(status));
}

}  // namespace

bool insideDistributedJob() { return std::getenv("WORLD_SIZE") != nullptr; }

void launchLocalRanks(int nproc) {
  if (nproc < 1) throw std::invalid_argument(fmt::format("--nproc {} must be at least 1", nproc));
  c10d::TCPStoreOptions options;
  options.port = 0;  // any free port
  options.isServer = true;
  options.waitWorkers = false;
  options.timeout = DistGroup::kTimeout;
  c10d::TCPStore store("127.0.0.1", options);

  std::vector<std::string> args = ownArguments();
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  std::vector<pid_t> pids;
  const pid_t launcher = getpid();
  const std::string jobId = fmt::format("{}-{}", launcher, store.getPort());
  for (int rank = 0; rank < nproc; ++rank) {
    pid_t pid = fork();
    if (pid < 0) throw std::runtime_error(fmt::format("cannot start rank {}: {}", rank, std::strerror(errno)));
    if (pid == 0) {
      // A rank never outlives its launcher (kill -9 of the launcher would otherwise leave it
      // training and writing the run directory); the death signal survives exec. Its own process
      // group keeps a terminal's Ctrl-C to the launcher, which passes it on exactly once.
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != launcher) _exit(128 + SIGKILL);  // the launcher died before prctl
      setpgid(0, 0);
      setenv("RANK", std::to_string(rank).c_str(), 1);
      setenv("LOCAL_RANK", std::to_string(rank).c_str(), 1);
      setenv("WORLD_SIZE", std::to_string(nproc).c_str(), 1);
      setenv("LOCAL_WORLD_SIZE", std::to_string(nproc).c_str(), 1);
      setenv("MASTER_ADDR", "127.0.0.1", 1);
      setenv("MASTER_PORT", std::to_string(store.getPort()).c_str(), 1);
      setenv("TORCHELASTIC_USE_AGENT_STORE", "True", 1);
      setenv("XTRAP_JOB_ID", jobId.c_str(), 1);
      execv("/proc/self/exe", argv.data());
      std::fprintf(stderr, "xtrap: error: cannot start rank %d: %s\n", rank, std::strerror(errno));
      _exit(127);
    }
    pids.push_back(pid);
  }

  std::optional<std::string> failure;
  std::chrono::steady_clock::time_point failedAt;
  int forwarded = 0;
  int running = nproc;
  while (running > 0) {
    int status = 0;
    pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid > 0) {
      --running;
      int rank = static_cast<int>(std::find(pids.begin(), pids.end(), pid) - pids.begin());
      pids[size_t(rank)] = 0;
      bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
      // A rank that stopped for the signal passed on to it did what it was told.
      bool stopped = forwarded != 0 && ((WIFEXITED(status) && WEXITSTATUS(status) == 128 + forwarded) ||
                                        (WIFSIGNALED(status) && WTERMSIG(status) == forwarded));
      if (!ok && !stopped && !failure) {
        failure = fmt::format("rank {} of {} {}", rank, nproc, describeStatus(status));
        failedAt = std::chrono::steady_clock::now();
      }
      continue;
    }
    if (int signal = interruptSignal(); signal != 0 && signal != forwarded) {
      for (pid_t p : pids)
        if (p > 0) kill(p, signal);
      forwarded = signal;
    }
    if (failure && std::chrono::steady_clock::now() - failedAt > kLaunchGrace)
      for (pid_t p : pids)
        if (p > 0) kill(p, SIGKILL);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  // Stopped by a signal passed on to the ranks: rank 0 said where the run stands; exit as the
  // signal says, without a second line.
  if (forwarded != 0 && !failure) throw Interrupted(forwarded, "");
  if (failure) throw std::runtime_error(*failure);
}

}  // namespace xtrap
