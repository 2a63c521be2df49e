#pragma once
// The names --device and --dtype accept (torch-free: configs and scenario files check them).
#include <stdexcept>
#include <string>

namespace xtrap {

inline const char* kDeviceNames = "auto | cpu | cuda";
inline const char* kDtypeNames = "float32 | bfloat16";

// Throw std::invalid_argument naming the choices.
inline void checkDeviceName(const std::string& device) {
  if (device != "auto" && device != "cpu" && device != "cuda")
    throw std::invalid_argument("unknown device '" + device + "' (valid: " + kDeviceNames + ")");
}
inline void checkDtypeName(const std::string& dtype) {
  if (dtype != "float32" && dtype != "bfloat16")
    throw std::invalid_argument("unknown dtype '" + dtype + "' (valid: " + kDtypeNames + ")");
}

}  // namespace xtrap
