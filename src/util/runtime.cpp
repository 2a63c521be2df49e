#include "util/runtime.h"

#include <malloc.h>
#include <torch/torch.h>

#include <limits>
#include <thread>

namespace xtrap {

void configureRuntime(int64_t threads) {
  static bool mallocTuned = false;
  if (!mallocTuned) {
    mallopt(M_MMAP_MAX, 0);
    mallopt(M_TRIM_THRESHOLD, std::numeric_limits<int>::max());  // never give the heap top back
    mallocTuned = true;
  }
  at::globalContext().setFlushDenormal(true);
  int64_t n = threads > 0 ? threads : static_cast<int64_t>(std::thread::hardware_concurrency());
  torch::set_num_threads(static_cast<int>(std::max<int64_t>(1, n)));
}

}  // namespace xtrap
