#pragma once
// 64-bit FNV-1a: the checksum of checkpoints and the token cache, and the data digest. Not
// cryptographic; it detects damaged or changed bytes, which is all these uses need.
#include <cstdint>
#include <string_view>

namespace xtrap {

constexpr uint64_t kFnv1a64Basis = 14695981039346656037ull;

// `h`: a previous result, to continue the hash over more bytes.
inline uint64_t fnv1a64(std::string_view bytes, uint64_t h = kFnv1a64Basis) {
  for (unsigned char b : bytes) h = (h ^ b) * 1099511628211ull;
  return h;
}

}  // namespace xtrap
