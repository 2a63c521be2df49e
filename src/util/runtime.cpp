#include "util/runtime.h"

#include <malloc.h>
#include <torch/torch.h>
#include <unistd.h>

#include <limits>
#include <stdexcept>
#include <thread>

#include "util/address_space.h"

namespace xtrap {

void configureRuntime(int64_t threads) {
  static bool mallocTuned = false;
  if (!mallocTuned) {
    // glibc's malloc (tests, and builds without tcmalloc, CMakeLists.txt); tcmalloc ignores these.
    mallopt(M_MMAP_MAX, 0);
    mallopt(M_TRIM_THRESHOLD, std::numeric_limits<int>::max());  // never give the heap top back
    mallocTuned = true;
  }
  at::globalContext().setFlushDenormal(true);
  int64_t n = threads > 0 ? threads : static_cast<int64_t>(std::thread::hardware_concurrency());
  // More threads than at start-up mean more OpenBLAS buffers, whose failed allocation would loop
  // (the start-up ones were checked before main and are mapped already).
  int extra = static_cast<int>(n) - startupBlasThreads(environ);
  if (extra > 0) {
    std::string shortfall = addressSpaceShortfall(extra);
    if (!shortfall.empty()) throw std::runtime_error(shortfall);
  }
  torch::set_num_threads(static_cast<int>(std::max<int64_t>(1, n)));
}

}  // namespace xtrap
