#include "run/safetensors_reader.h"

#include <algorithm>
#include <limits>
#include <nlohmann/json.hpp>
#include <stdexcept>

namespace xtrap {

int64_t safetensorsElementBytes(const std::string& dtype) {
  static const std::map<std::string, int64_t> sizes = {
      {"F64", 8}, {"F32", 4}, {"F16", 2}, {"BF16", 2}, {"I64", 8},  {"I32", 4},     {"I16", 2},    {"I8", 1},
      {"U64", 8}, {"U32", 4}, {"U16", 2}, {"U8", 1},   {"BOOL", 1}, {"F8_E4M3", 1}, {"F8_E5M2", 1}};
  auto it = sizes.find(dtype);
  return it == sizes.end() ? 0 : it->second;
}

std::map<std::string, SafetensorsTensor> parseSafetensors(std::string_view file, const std::string& source) {
  auto fail = [&](const std::string& why) { throw std::runtime_error("safetensors " + source + ": " + why); };
  if (file.size() < 8) fail("shorter than the 8-byte header length (truncated?)");
  uint64_t headerBytes = 0;
  for (int i = 7; i >= 0; --i) headerBytes = (headerBytes << 8) | static_cast<unsigned char>(file[size_t(i)]);
  if (headerBytes > file.size() - 8)
    fail("the header claims " + std::to_string(headerBytes) + " bytes, the file has " +
         std::to_string(file.size() - 8) + " after the length (truncated?)");
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(file.substr(8, headerBytes));
  } catch (const nlohmann::json::exception&) {
    fail("the header is not valid JSON");
  }
  if (!header.is_object()) fail("the header is not a JSON object");
  uint64_t dataBytes = file.size() - 8 - headerBytes;
  std::map<std::string, SafetensorsTensor> tensors;
  for (auto it = header.begin(); it != header.end(); ++it) {
    const std::string& name = it.key();
    if (name == "__metadata__") continue;
    const auto& e = it.value();
    auto where = "tensor '" + name + "': ";
    if (!e.is_object() || !e.contains("dtype") || !e.contains("shape") || !e.contains("data_offsets") ||
        !e["dtype"].is_string() || !e["shape"].is_array() || !e["data_offsets"].is_array() ||
        e["data_offsets"].size() != 2)
      fail(where + "needs a dtype string, a shape list and two data_offsets");
    SafetensorsTensor t;
    t.dtype = e["dtype"].get<std::string>();
    int64_t element = safetensorsElementBytes(t.dtype);
    if (element == 0) fail(where + "unknown dtype '" + t.dtype + "'");
    uint64_t count = 1;
    for (const auto& d : e["shape"]) {
      if (!d.is_number_unsigned()) fail(where + "the shape holds something other than non-negative integers");
      auto n = d.get<uint64_t>();
      if (n != 0 && count > std::numeric_limits<uint64_t>::max() / 8 / n) fail(where + "the shape is impossibly large");
      count *= n;
      t.shape.push_back(static_cast<int64_t>(n));
    }
    for (const auto& o : e["data_offsets"])
      if (!o.is_number_unsigned()) fail(where + "data_offsets must be non-negative integers");
    auto begin = e["data_offsets"][0].get<uint64_t>(), end = e["data_offsets"][1].get<uint64_t>();
    if (begin > end || end > dataBytes)
      fail(where + "data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) + ") lie outside the " +
           std::to_string(dataBytes) + " data bytes (truncated?)");
    if (end - begin != count * uint64_t(element))
      fail(where + std::to_string(end - begin) + " bytes do not hold " + std::to_string(count) + " " + t.dtype +
           " elements");
    t.offset = 8 + headerBytes + begin;
    t.bytes = end - begin;
    tensors.emplace(name, std::move(t));
  }
  std::vector<std::pair<uint64_t, const std::string*>> byOffset;  // (offset, name)
  for (const auto& [name, t] : tensors) byOffset.emplace_back(t.offset, &name);
  std::sort(byOffset.begin(), byOffset.end());
  for (size_t i = 1; i < byOffset.size(); ++i) {
    const auto& previous = tensors.at(*byOffset[i - 1].second);
    if (previous.offset + previous.bytes > byOffset[i].first)
      fail("tensors '" + *byOffset[i - 1].second + "' and '" + *byOffset[i].second + "' overlap");
  }
  return tensors;
}

SafetensorsFile::SafetensorsFile(const std::filesystem::path& path)
    : path_(path), file_(std::make_unique<MappedFile>(path)) {
  tensors_ = parseSafetensors(file_->bytes(), path.string());
}

}  // namespace xtrap
