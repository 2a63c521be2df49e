#include "run/checkpoint_file.h"

#include <fmt/format.h>

#include <cstring>
#include <stdexcept>

namespace xtrap {
namespace {

constexpr char kMagic[8] = {'X', 'T', 'R', 'A', 'P', 'C', 'K', 'P'};
constexpr size_t kHeaderBytes = sizeof(kMagic) + sizeof(uint32_t) + 2 * sizeof(uint64_t);

template <typename T>
void append(std::string& out, T v) {
  out.append(reinterpret_cast<const char*>(&v), sizeof(T));
}
template <typename T>
T readAt(std::string_view bytes, size_t offset) {
  T v;
  std::memcpy(&v, bytes.data() + offset, sizeof(T));
  return v;
}

}  // namespace

std::string checkpointHeader(uint64_t size, uint64_t checksum) {
  std::string out(kMagic, sizeof(kMagic));
  append(out, kCheckpointFormatVersion);
  append(out, size);
  append(out, checksum);
  return out;
}

std::string frameCheckpoint(std::string_view payload) {
  return checkpointHeader(payload.size(), fnv1a64(payload)).append(payload);
}

std::string_view unframeCheckpoint(std::string_view bytes, const std::string& file) {
  if (bytes.size() < sizeof(kMagic) || std::memcmp(bytes.data(), kMagic, sizeof(kMagic)) != 0)
    throw std::runtime_error("not an xtrap checkpoint: " + file);
  if (bytes.size() < kHeaderBytes) throw std::runtime_error("truncated checkpoint (incomplete header): " + file);
  auto version = readAt<uint32_t>(bytes, 8);
  if (version != kCheckpointFormatVersion)
    throw std::runtime_error(fmt::format("checkpoint {} has format version {}; this xtrap reads version {}", file,
                                         version, kCheckpointFormatVersion));
  auto size = readAt<uint64_t>(bytes, 12);
  auto checksum = readAt<uint64_t>(bytes, 20);
  std::string_view payload = bytes.substr(kHeaderBytes);
  if (payload.size() < size)
    throw std::runtime_error(
        fmt::format("truncated checkpoint {}: {} of {} payload bytes", file, payload.size(), size));
  if (payload.size() > size)
    throw std::runtime_error(
        fmt::format("corrupt checkpoint {}: {} bytes after the payload", file, payload.size() - size));
  if (fnv1a64(payload) != checksum) throw std::runtime_error("corrupt checkpoint " + file + ": checksum mismatch");
  return payload;
}

}  // namespace xtrap
