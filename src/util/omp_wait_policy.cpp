#include "util/omp_wait_policy.h"

#include <unistd.h>

#include <cstdlib>

namespace xtrap {

void reexecWithPassiveOmpWait(char** argv) {
#ifdef __linux__
  if (std::getenv("OMP_WAIT_POLICY") || std::getenv("GOMP_SPINCOUNT")) return;  // the user's choice, or done
  if (setenv("OMP_WAIT_POLICY", "passive", 1) != 0) return;
  execv("/proc/self/exe", argv);  // returns only on failure: carry on with the loaded settings
#else
  (void)argv;
#endif
}

}  // namespace xtrap
