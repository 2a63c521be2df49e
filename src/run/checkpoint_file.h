#pragma once
// The container around a checkpoint's LibTorch archive: magic "XTRAPCKP", format version,
// payload size and a 64-bit FNV-1a checksum of the payload, then the payload. Checking these
// before LibTorch parses anything turns a truncated, corrupted or foreign file into a one-line
// error instead of a crash deep inside the zip reader.
#include <cstdint>
#include <string>
#include <string_view>

#include "util/fnv1a64.h"

namespace xtrap {

constexpr uint32_t kCheckpointFormatVersion = 2;

// The header of a payload of `size` bytes whose fnv1a64 is `checksum` (a writer that streams the
// payload writes it last, over a placeholder of the same length).
std::string checkpointHeader(uint64_t size, uint64_t checksum);
// Header + payload, ready to be written atomically.
std::string frameCheckpoint(std::string_view payload);
// The payload of a framed checkpoint; throws std::runtime_error naming `file` when the bytes are
// not an xtrap checkpoint, have another format version, are truncated or fail the checksum.
std::string_view unframeCheckpoint(std::string_view bytes, const std::string& file);

}  // namespace xtrap
