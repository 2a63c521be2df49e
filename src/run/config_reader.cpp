#include "run/config_reader.h"

#include <fstream>
#include <stdexcept>

namespace xtrap {

nlohmann::json readJsonFile(const std::string& file) {
  std::ifstream in(file);
  if (!in) throw std::runtime_error("cannot read " + file);
  try {
    return nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception&) {
    throw std::runtime_error(file + " is not valid JSON");
  }
}

ConfigReader::ConfigReader(const nlohmann::json& j, std::string file, std::set<std::string> computed,
                           std::string prefix)
    : j_(j), file_(std::move(file)), computed_(std::move(computed)), prefix_(std::move(prefix)) {
  if (!j_.is_object())
    fail(prefix_.empty() ? "not a JSON object" : prefix_.substr(0, prefix_.size() - 1) + " must be an object");
}

void ConfigReader::fail(const std::string& why) const { throw std::runtime_error(file_ + ": " + why); }

void ConfigReader::declared(const char* name) const {
  if (!computed_.empty() && !computed_.count(prefix_ + name))
    throw std::logic_error("config key " + prefix_ + name + " is read but not in its family's table of computed keys");
}

const nlohmann::json* ConfigReader::find(std::initializer_list<const char*> names) const {
  for (const char* n : names) {
    declared(n);
    if (j_.contains(n) && !j_[n].is_null()) return &j_[n];
  }
  return nullptr;
}

int64_t ConfigReader::integer(std::initializer_list<const char*> names) const {
  const auto* v = find(names);
  if (!v) fail("needs " + key(*names.begin()));
  // Below 2^31: no config dimension comes near, and products of them stay far from overflow.
  if (!v->is_number_integer() || v->get<int64_t>() < 1 || v->get<int64_t>() >= (int64_t(1) << 31))
    fail(key(*names.begin()) + " must be a positive integer below 2^31");
  return v->get<int64_t>();
}

int64_t ConfigReader::integer(const char* name, int64_t fallback) const {
  return find({name}) ? integer({name}) : fallback;
}

double ConfigReader::number(std::initializer_list<const char*> names, double fallback) const {
  const auto* v = find(names);
  if (!v) return fallback;
  if (!v->is_number()) fail(key(*names.begin()) + " must be a number");
  return v->get<double>();
}

bool ConfigReader::flag(const char* name, bool fallback) const {
  const auto* v = find({name});
  if (!v) return fallback;
  if (!v->is_boolean()) fail(key(name) + " must be true or false");
  return v->get<bool>();
}

std::string ConfigReader::text(const char* name, const std::string& fallback) const {
  const auto* v = find({name});
  if (!v) return fallback;
  if (!v->is_string()) fail(key(name) + " must be a string");
  return v->get<std::string>();
}

std::vector<std::string> ConfigReader::texts(const char* name) const {
  const auto* v = find({name});
  if (!v) return {};
  std::vector<std::string> out;
  if (!v->is_array()) fail(key(name) + " must be a list of strings");
  for (const auto& e : *v) {
    if (!e.is_string()) fail(key(name) + " must be a list of strings");
    out.push_back(e.get<std::string>());
  }
  return out;
}

ConfigReader ConfigReader::object(const char* name) const {
  static const nlohmann::json empty = nlohmann::json::object();
  const auto* v = find({name});
  return ConfigReader(v ? *v : empty, file_, computed_, prefix_ + name + ".");
}

}  // namespace xtrap
