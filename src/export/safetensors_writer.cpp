#include "export/safetensors_writer.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>

#include "util/interrupt.h"

namespace xtrap {

namespace {
size_t dtypeBytes(const std::string& dtype) {
  static const std::map<std::string, size_t> sizes{{"F64", 8}, {"F32", 4}, {"F16", 2}, {"BF16", 2}, {"I64", 8},
                                                   {"I32", 4}, {"I16", 2}, {"I8", 1},  {"U8", 1},   {"BOOL", 1}};
  auto it = sizes.find(dtype);
  if (it == sizes.end()) throw std::invalid_argument("safetensors: unsupported dtype " + dtype);
  return it->second;
}

void writeLittleEndian64(std::ostream& out, uint64_t v) {
  char b[8];
  for (int i = 0; i < 8; ++i) b[i] = static_cast<char>((v >> (8 * i)) & 0xff);
  out.write(b, 8);
}
}  // namespace

void writeSafetensors(std::ostream& out, const std::vector<SafetensorsEntry>& entries,
                      const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json header;
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::set<std::string> names;
  size_t offset = 0;
  for (const auto& e : entries) {
    if (e.name == "__metadata__" || !names.insert(e.name).second)
      throw std::invalid_argument("safetensors: duplicate or reserved tensor name " + e.name);
    size_t count = 1;
    for (int64_t d : e.shape) count *= static_cast<size_t>(d);
    if (count * dtypeBytes(e.dtype) != e.bytes)
      throw std::invalid_argument(
          fmt::format("safetensors: {} has {} bytes, not {}", e.name, e.bytes, count * dtypeBytes(e.dtype)));
    header[e.name] = {{"dtype", e.dtype}, {"shape", e.shape}, {"data_offsets", {offset, offset + e.bytes}}};
    offset += e.bytes;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // pad so the data starts 8-byte aligned
  writeLittleEndian64(out, text.size());
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  for (const auto& e : entries) {
    throwIfInterrupted();  // between tensors: a large export stops soon after SIGINT/SIGTERM
    out.write(static_cast<const char*>(e.data), static_cast<std::streamsize>(e.bytes));
  }
}

}  // namespace xtrap
