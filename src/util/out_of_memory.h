#pragma once
// An allocation that fails deep inside LibTorch (a 16k-token evaluation on a GPU, a batch too large
// for the machine) as the one line a user can act on: what was being done, how much was asked
// for, and the option that lowers it. CUDA's caching allocator throws c10::OutOfMemoryError;
// LibTorch's CPU allocator a plain c10::Error whose message says "DefaultCPUAllocator: can't
// allocate memory" (1.13) or "not enough memory" (older and newer versions), so that one is
// recognised by its text.
#include <exception>
#include <stdexcept>
#include <string>

namespace xtrap {

// The size of the allocation that failed ("4.00 GiB", "228065280 bytes"), or "an allocation"
// when the message does not say, for an allocator's out-of-memory error; empty for any other.
std::string failedAllocation(const std::exception& error);

// Runs `work`; an out-of-memory error from it becomes a std::runtime_error
// "out of memory <doing> tried to allocate X: <remedy>" (`doing` ends with a comma). Other
// exceptions pass unchanged.
template <class Work>
auto withOutOfMemoryAdvice(const std::string& doing, const std::string& remedy, Work&& work) {
  try {
    return work();
  } catch (const std::exception& e) {
    std::string size = failedAllocation(e);
    if (size.empty()) throw;
    throw std::runtime_error("out of memory " + doing + " tried to allocate " + size + ": " + remedy);
  }
}

}  // namespace xtrap
