#pragma once
// The safetensors format (https://github.com/huggingface/safetensors), written directly: an 8-byte
// little-endian header length, a JSON header {name: {dtype, shape, data_offsets}, "__metadata__":
// {string: string}}, then the raw little-endian tensor bytes in offset order. Written by hand
// with nlohmann-json because Debian packages no C++ safetensors library, and the format is a
// few lines. Torch-free: tensors arrive as plain byte buffers.
#include <cstdint>
#include <map>
#include <ostream>
#include <string>
#include <vector>

namespace xtrap {

struct SafetensorsEntry {
  std::string name;
  std::string dtype;  // "F32", "I64", "BOOL", ...
  std::vector<int64_t> shape;
  const void* data = nullptr;  // little-endian, contiguous, row-major
  size_t bytes = 0;
};

// Writes entries in the given order; throws std::invalid_argument on a duplicate name or a byte
// count that does not match dtype and shape.
void writeSafetensors(std::ostream& out, const std::vector<SafetensorsEntry>& entries,
                      const std::map<std::string, std::string>& metadata);

}  // namespace xtrap
