#pragma once
// Process-wide settings every xtrap command applies before touching tensors.
#include <cstdint>

namespace xtrap {

// - glibc malloc: keep big tensor buffers in the heap instead of mmap/munmap on every step
//   (M_MMAP_MAX = 0, high M_TRIM_THRESHOLD; ~1.6x on training here);
// - flush denormals to zero (a backward pass was 20x slower with denormals);
// - intra-op threads (0 = all cores), one inter-op thread.
void configureRuntime(int64_t threads);

}  // namespace xtrap
