#pragma once
// The torchrun environment contract: RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT (and
// TORCHELASTIC_USE_AGENT_STORE=True when the launcher, not rank 0, hosts the TCPStore). Without
// WORLD_SIZE, or with WORLD_SIZE=1 and no MASTER_ADDR, xtrap runs as a single process; WORLD_SIZE=1
// with MASTER_ADDR/MASTER_PORT (torchrun with one rank) makes a real process group of one, as
// DistributedDataParallel does, so the collectives' code path runs at world size 1 too.
#include <cstdint>
#include <string>

namespace xtrap {

struct DistEnv {
  int rank = 0;
  int world = 1;
  int localRank = 0;
  std::string masterAddr = "127.0.0.1";
  int masterPort = 29500;
  bool agentStore = false;  // the launcher hosts the store; every rank is a client
  bool launched = false;    // the torchrun contract is present: a process group is made
  // Names this job in the store's keys, so a rank that reaches another job's store (a reused
  // MASTER_PORT) never joins that job: XTRAP_JOB_ID (set by --nproc), else torchrun's
  // TORCHELASTIC_RUN_ID, else "default".
  std::string jobId = "default";
  bool distributed() const { return world > 1; }
};

// Reads and checks the variables; a bad value is a one-line std::invalid_argument.
DistEnv distEnvFromEnvironment();

}  // namespace xtrap
