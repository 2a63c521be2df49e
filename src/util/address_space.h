#pragma once
// Under an address-space limit (ulimit -v) too small for OpenBLAS's per-thread work buffers,
// OpenBLAS retries its failed allocation forever (memory.c: `while (map_address == -1)`), at
// start-up already: even `xtrap --version` would hang. xtrap checks the limit first instead and
// fails with one line.
#include <string>

namespace xtrap {

// OpenBLAS's buffer per thread (BUFFER_SIZE, 128 MiB on x86-64, plus a page), all allocated at
// once when a library or a computation starts its threads.
constexpr long long kBlasBufferBytes = (128LL << 20) + 4096;
// Room beyond the BLAS buffers: thread stacks, allocator arenas, LibTorch's start-up.
constexpr long long kAddressSpaceReserveBytes = 256LL << 20;

// Empty when the soft RLIMIT_AS leaves room for `threads` BLAS buffers and the reserve beyond
// what is mapped now; else the one-line reason (without "xtrap: error: ").
std::string addressSpaceShortfall(int threads);

// The threads OpenBLAS starts with: OMP_NUM_THREADS in `envp` when set, else the CPUs this process
// may use. Takes the environment explicitly: before libc's initialiser, getenv() may not see it.
int startupBlasThreads(char** envp);

}  // namespace xtrap
