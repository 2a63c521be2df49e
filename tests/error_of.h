#pragma once
// The message of the exception `f` throws, or "" if it throws none (for one-line error checks).
#include <functional>
#include <string>

namespace xtrap::test {

inline std::string errorOf(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

}  // namespace xtrap::test
