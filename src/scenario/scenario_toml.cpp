#include "scenario/scenario_toml.h"

#include <fmt/format.h>

#include <stdexcept>

namespace xtrap {
namespace fs = std::filesystem;

std::string ScenarioSource::at(const toml::source_region& r) const {
  return fmt::format("{}:{}:{}", name, r.begin.line, r.begin.column);
}

void ScenarioSource::fail(const toml::source_region& r, const std::string& why) const {
  std::string line;
  for (unsigned char c : why)
    line += c == '\n' ? "\\n" : c < 0x20 || c == 0x7f ? fmt::format("\\x{:02x}", c) : std::string(1, char(c));
  throw std::invalid_argument(at(r) + ": " + line);
}

fs::path ScenarioSource::path(const std::string& written) const {
  fs::path p = written;
  return p.is_absolute() ? p : (baseDir / p).lexically_normal();
}

void TomlValue::fail(const std::string& why) const { src.fail(node.source(), key + ": " + why); }

int64_t TomlValue::integer() const {
  if (auto* v = node.as_integer()) return v->get();
  fail("expected an integer");
}

double TomlValue::number() const {
  if (auto* v = node.as_floating_point()) return v->get();
  if (auto* v = node.as_integer()) return double(v->get());
  fail("expected a number");
}

bool TomlValue::boolean() const {
  if (auto* v = node.as_boolean()) return v->get();
  fail("expected true or false");
}

std::string TomlValue::string() const {
  if (auto* v = node.as_string()) return v->get();
  fail("expected a string");
}

namespace {

// The list `v` holds, every item a T (toml++'s value<T>), or a failure naming `what`.
template <typename T>
std::vector<T> listOf(const TomlValue& v, const char* what) {
  auto* a = v.node.as_array();
  if (!a) v.fail(std::string("expected a list of ") + what);
  std::vector<T> out;
  for (const auto& item : *a) {
    auto* x = item.as<T>();
    if (!x) v.fail(std::string("expected a list of ") + what);
    out.push_back(x->get());
  }
  return out;
}

}  // namespace

std::vector<int64_t> TomlValue::integers() const { return listOf<int64_t>(*this, "integers"); }

std::vector<double> TomlValue::numbers() const {
  auto* a = node.as_array();
  if (!a) fail("expected a list of numbers");
  std::vector<double> out;
  for (const auto& item : *a) {
    if (auto* f = item.as_floating_point())
      out.push_back(f->get());
    else if (auto* i = item.as_integer())
      out.push_back(double(i->get()));
    else
      fail("expected a list of numbers");
  }
  return out;
}

std::vector<std::string> TomlValue::strings() const { return listOf<std::string>(*this, "strings"); }

std::string TomlValue::choice(void (*check)(const std::string&)) const {
  std::string s = string();
  try {
    check(s);
  } catch (const std::invalid_argument& e) {
    fail(e.what());
  }
  return s;
}

uint64_t TomlValue::seed() const {
  int64_t s = integer();
  if (s < 0) fail("must be >= 0");
  return uint64_t(s);
}

const toml::table& asTable(const ScenarioSource& src, const toml::node& node, const std::string& what) {
  if (auto* t = node.as_table()) return *t;
  src.fail(node.source(), what + ": expected a table");
}

void rejectUnknown(const ScenarioSource& src, const toml::table& t, const std::string& where,
                   const std::set<std::string>& known) {
  for (auto&& [k, node] : t)
    if (!known.count(std::string(k.str())))
      src.fail(k.source(), "unknown key '" + std::string(k.str()) + "' in " + where);
}

}  // namespace xtrap
