#pragma once
// A torchrun job of one rank for tests: this process hosts the store, as a launcher would
// (TORCHELASTIC_USE_AGENT_STORE=True), on a free loopback port, and joins it as rank 0.
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

}  // namespace xtrap::test
