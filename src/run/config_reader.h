#pragma once
// Typed reading of a Hugging Face config.json object, every error one line naming the file and the
// key. A reader also enforces its family's key table (run/pretrained_family.h): reading a key the
// table does not list as computed is a programming error, so the table that the documentation and
// the tests read cannot drift from the code that reads the keys. Torch-free.
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

namespace xtrap {

// Parses a JSON file. Throws std::runtime_error "cannot read FILE" / "FILE is not valid JSON".
nlohmann::json readJsonFile(const std::string& file);

class ConfigReader {
 public:
  // `computed`: the keys this reader may read (empty: any). `prefix` names nested objects in
  // messages ("attn_config.").
  ConfigReader(const nlohmann::json& j, std::string file, std::set<std::string> computed = {}, std::string prefix = "");

  [[noreturn]] void fail(const std::string& why) const;
  // The value of the first of `names` present and not null; nullptr when none is.
  const nlohmann::json* find(std::initializer_list<const char*> names) const;
  bool has(const char* name) const { return find({name}) != nullptr; }
  // A positive integer below 2^31, required (the first name is the one errors give).
  int64_t integer(std::initializer_list<const char*> names) const;
  int64_t integer(const char* name, int64_t fallback) const;
  double number(std::initializer_list<const char*> names, double fallback) const;
  bool flag(const char* name, bool fallback) const;
  std::string text(const char* name, const std::string& fallback) const;
  std::vector<std::string> texts(const char* name) const;  // a list of strings; empty when absent
  // A nested object (absent or null: an empty one), read with the same table under "name.".
  ConfigReader object(const char* name) const;
  const nlohmann::json& json() const { return j_; }
  const std::string& file() const { return file_; }
  std::string key(const char* name) const { return prefix_ + name; }

 private:
  void declared(const char* name) const;
  const nlohmann::json& j_;
  std::string file_;
  std::set<std::string> computed_;
  std::string prefix_;
};

}  // namespace xtrap
