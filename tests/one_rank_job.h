#pragma once
// A torchrun job of one rank for tests: this process hosts the store, as a launcher would
// (TORCHELASTIC_USE_AGENT_STORE=True), on a free loopback port, and joins it as rank 0.
#include <cstdlib>
#include <string>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "dist/dist_group.h"

namespace xtrap::test {

inline DistEnv oneRankEnv(const c10d::TCPStore& store) {
  DistEnv env;
  env.launched = true;
  env.agentStore = true;
  env.masterPort = store.getPort();
  return env;
}

inline c10d::TCPStoreOptions launcherStoreOptions() {
  c10d::TCPStoreOptions options;
  options.port = 0;  // any free port
  options.isServer = true;
  options.waitWorkers = false;
  return options;
}

struct OneRankJob {
  explicit OneRankJob(torch::Device device = torch::kCPU)
      : store("127.0.0.1", launcherStoreOptions()), group(oneRankEnv(store), device) {}
  c10d::TCPStore store;
  DistGroup group;
};

// The torchrun environment of a job of one rank, for code that makes its own DistGroup from the
// environment (trainRun): this process hosts the store; the variables are unset again at the end.
struct OneRankEnvironment {
  OneRankEnvironment() : store("127.0.0.1", launcherStoreOptions()) {
    const std::string port = std::to_string(store.getPort());
    setenv("WORLD_SIZE", "1", 1);
    setenv("RANK", "0", 1);
    setenv("LOCAL_RANK", "0", 1);
    setenv("MASTER_ADDR", "127.0.0.1", 1);
    setenv("MASTER_PORT", port.c_str(), 1);
    setenv("TORCHELASTIC_USE_AGENT_STORE", "True", 1);
  }
  ~OneRankEnvironment() {
    for (const char* v :
         {"WORLD_SIZE", "RANK", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_USE_AGENT_STORE"})
      unsetenv(v);
  }
  c10d::TCPStore store;
};

}  // namespace xtrap::test
