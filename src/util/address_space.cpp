#include "util/address_space.h"

#include <sched.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace xtrap {

namespace {
// Bytes mapped by this process now (the first field of /proc/self/statm, in pages). Read with
// stdio only: this runs before any library is initialised.
long long mappedBytes() {
  long long pages = 0;
  if (FILE* f = std::fopen("/proc/self/statm", "r")) {
    if (std::fscanf(f, "%lld", &pages) != 1) pages = 0;
    std::fclose(f);
  }
  return pages * ::sysconf(_SC_PAGESIZE);
}
}  // namespace

int startupBlasThreads(char** envp) {
  for (char** e = envp; e != nullptr && *e != nullptr; ++e)
    if (std::strncmp(*e, "OMP_NUM_THREADS=", 16) == 0 && std::atoi(*e + 16) > 0) return std::atoi(*e + 16);
  cpu_set_t set;
  if (::sched_getaffinity(0, sizeof(set), &set) == 0) return CPU_COUNT(&set);
  return static_cast<int>(::sysconf(_SC_NPROCESSORS_ONLN));
}

std::string addressSpaceShortfall(int threads) {
  struct rlimit limit {};
  if (::getrlimit(RLIMIT_AS, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return "";
  const long long cap = static_cast<long long>(limit.rlim_cur);
  const long long need = mappedBytes() + threads * kBlasBufferBytes + kAddressSpaceReserveBytes;
  if (need <= cap) return "";
  char text[320];
  std::snprintf(text, sizeof(text),
                "the address-space limit (ulimit -v) of %lld MiB is too small: %d BLAS thread(s) need about %lld "
                "MiB (raise the limit, or use fewer threads: OMP_NUM_THREADS / --threads)",
                cap >> 20, threads, (need + (1 << 20) - 1) >> 20);
  return text;
}

}  // namespace xtrap
