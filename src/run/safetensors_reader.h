#pragma once
// Reading the safetensors format (the writer's counterpart, export/safetensors_writer.h; here in
// run/ because evaluation, below export, loads pretrained weights with it): an 8-byte
// little-endian header length, a JSON header {name: {dtype, shape, data_offsets}, "__metadata__":
// {...}}, then the tensor bytes, offsets counted from the end of the header. Nothing in a file is
// trusted: the header length, every dtype, shape and offset pair is checked against the bytes
// before a tensor is handed out, and tensors may not overlap. The file is memory-mapped for its
// header; a tensor's bytes are read with pread into the caller's memory (read()), so the file's
// pages never count towards the reading process's resident memory. Torch-free.
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "util/mapped_file.h"

namespace xtrap {

struct SafetensorsTensor {
  std::string dtype;  // "F32", "F16", "BF16", ... (safetensorsElementBytes knows them)
  std::vector<int64_t> shape;
  uint64_t offset = 0;  // of the first byte, from the start of the file
  uint64_t bytes = 0;
};

// Bytes of one element of a safetensors dtype; 0 for a name the format does not define.
int64_t safetensorsElementBytes(const std::string& dtype);

// Parses and checks the header of a whole file's bytes. Throws std::runtime_error
// "safetensors SOURCE: <reason>" (one line) for anything inconsistent.
std::map<std::string, SafetensorsTensor> parseSafetensors(std::string_view file, const std::string& source);

class SafetensorsFile {
 public:
  // Maps `path` and checks its header (parseSafetensors); errors name the file.
  explicit SafetensorsFile(const std::filesystem::path& path);
  const std::filesystem::path& path() const { return path_; }
  const std::map<std::string, SafetensorsTensor>& tensors() const { return tensors_; }
  // Copies a tensor of this file into `out` (t.bytes bytes).
  void read(const SafetensorsTensor& t, void* out) const { file_->read(t.offset, t.bytes, out); }

 private:
  std::filesystem::path path_;
  std::unique_ptr<MappedFile> file_;
  std::map<std::string, SafetensorsTensor> tensors_;
};

}  // namespace xtrap
