#pragma once
// Reading a scenario's TOML: every error is one line "FILE:LINE:COLUMN: KEY: reason", from the
// parse itself, from a value of the wrong type, or from a key a table does not know. Torch-free.
#include <toml++/toml.h>

#include <cstdint>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

namespace xtrap {

// Context for one parse: where errors point and where relative paths start.
struct ScenarioSource {
  std::string name;
  std::filesystem::path baseDir;

  std::string at(const toml::source_region& r) const;
  // toml++'s descriptions quote the offending text, newlines included (found by fuzz_scenario),
  // and values are echoed as written: control characters are escaped so the error stays one line.
  [[noreturn]] void fail(const toml::source_region& r, const std::string& why) const;
  // A path as written in the file: absolute, or relative to the file's directory.
  std::filesystem::path path(const std::string& written) const;
};

// One `key = value` with typed accessors that fail naming the key and its position.
struct TomlValue {
  const ScenarioSource& src;
  const std::string& key;
  const toml::node& node;

  [[noreturn]] void fail(const std::string& why) const;
  int64_t integer() const;
  double number() const;
  bool boolean() const;
  std::string string() const;
  std::vector<int64_t> integers() const;
  std::vector<double> numbers() const;  // integers or floats
  std::vector<std::string> strings() const;
  // A string `check` accepts (it throws a one-line std::invalid_argument naming the choices).
  std::string choice(void (*check)(const std::string&)) const;
  uint64_t seed() const;  // an integer >= 0
};

const toml::table& asTable(const ScenarioSource& src, const toml::node& node, const std::string& what);

// Fails on the first key of `t` not in `known`, naming `where`.
void rejectUnknown(const ScenarioSource& src, const toml::table& t, const std::string& where,
                   const std::set<std::string>& known);

}  // namespace xtrap
