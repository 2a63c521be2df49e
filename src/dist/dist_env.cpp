#include "dist/dist_env.h"

#include <fmt/format.h>

#include <cstdlib>
#include <stdexcept>

namespace xtrap {

namespace {

int intVariable(const char* name, int fallback, int lowest) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == '\0') return fallback;
  char* end = nullptr;
  long value = std::strtol(text, &end, 10);
  if (*end != '\0' || value < lowest || value > 1 << 20)
    throw std::invalid_argument(fmt::format("bad {}='{}' (an integer >= {})", name, text, lowest));
  return static_cast<int>(value);
}

}  // namespace

DistEnv distEnvFromEnvironment() {
  DistEnv env;
  env.world = intVariable("WORLD_SIZE", 1, 1);
  env.rank = intVariable("RANK", 0, 0);
  env.localRank = intVariable("LOCAL_RANK", env.rank, 0);
  if (env.rank >= env.world)
    throw std::invalid_argument(fmt::format("RANK={} is not below WORLD_SIZE={}", env.rank, env.world));
  const char* addr = std::getenv("MASTER_ADDR");
  bool hasAddr = addr != nullptr && *addr != '\0';
  if (!env.distributed() && !hasAddr) return env;
  if (!hasAddr)
    throw std::invalid_argument("WORLD_SIZE > 1 needs MASTER_ADDR and MASTER_PORT (the torchrun environment)");
  env.launched = true;
  env.masterAddr = addr;
  env.masterPort = intVariable("MASTER_PORT", 0, 1);
  if (env.masterPort == 0 || env.masterPort > 65535)
    throw std::invalid_argument("the torchrun environment needs MASTER_PORT in 1..65535");
  for (const char* name : {"TORCHELASTIC_RUN_ID", "XTRAP_JOB_ID"})  // the later one wins
    if (const char* id = std::getenv(name); id != nullptr && *id != '\0') env.jobId = id;
  const char* agent = std::getenv("TORCHELASTIC_USE_AGENT_STORE");
  env.agentStore = agent != nullptr && std::string(agent) == "True";
  return env;
}

}  // namespace xtrap
