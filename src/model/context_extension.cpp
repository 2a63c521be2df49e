#include "model/context_extension.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <tuple>

namespace xtrap {

namespace {

const std::vector<std::pair<std::string, ExtensionMethod>>& methodTable() {
  static const std::vector<std::pair<std::string, ExtensionMethod>> table = {
      {"none", ExtensionMethod::None},     {"sinks", ExtensionMethod::Sinks},
      {"lambda", ExtensionMethod::Lambda}, {"self-extend", ExtensionMethod::SelfExtend},
      {"rerope", ExtensionMethod::ReRope}, {"leaky-rerope", ExtensionMethod::LeakyReRope},
  };
  return table;
}

std::string fmtNumber(double x) { return fmt::format("{:g}", x); }

}  // namespace

const std::vector<std::string>& extensionMethodNames() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n;
    for (const auto& [name, m] : methodTable()) n.push_back(name);
    n.push_back("logn");
    return n;
  }();
  return names;
}

int64_t ContextExtension::nearDistance() const {
  switch (method) {
    case ExtensionMethod::Sinks:
      return window + 1;  // the recent keys, i - j <= W, keep their positions
    case ExtensionMethod::Lambda:
      return distanceLimit;
    case ExtensionMethod::SelfExtend:
    case ExtensionMethod::ReRope:
    case ExtensionMethod::LeakyReRope:
      return window;
    case ExtensionMethod::None:
      break;
  }
  return std::numeric_limits<int64_t>::max();
}

int64_t ContextExtension::recentDistance() const {
  if (method == ExtensionMethod::Sinks) return window + 1;
  if (method == ExtensionMethod::Lambda) return window;
  return 0;
}

bool ContextExtension::visible(int64_t i, int64_t j) const {
  return j <= i && (j < sinkTokens || recentDistance() == 0 || i - j < recentDistance());
}

bool ContextExtension::far(int64_t i, int64_t j) const { return i - j >= nearDistance(); }

double ContextExtension::farQueryPosition(int64_t i) const {
  switch (method) {
    case ExtensionMethod::Sinks:
      return double(std::min(i, sinkTokens + window));
    case ExtensionMethod::Lambda:
      return double(distanceLimit);
    case ExtensionMethod::SelfExtend:
      return double(i / group) + double(window) - double(window) / double(group);
    case ExtensionMethod::ReRope:
      return double(window);
    case ExtensionMethod::LeakyReRope:
      return (double(i) + double(window) * (leak - 1)) / leak;
    case ExtensionMethod::None:
      return double(i);
  }
  return double(i);
}

double ContextExtension::farKeyPosition(int64_t j) const {
  switch (method) {
    case ExtensionMethod::Sinks:
    case ExtensionMethod::None:
      return double(j);
    case ExtensionMethod::Lambda:
    case ExtensionMethod::ReRope:
      return 0.0;
    case ExtensionMethod::SelfExtend:
      return double(j / group);
    case ExtensionMethod::LeakyReRope:
      return double(j) / leak;
  }
  return double(j);
}

double ContextExtension::queryScale(int64_t i) const {
  if (!logn) return 1.0;
  return std::max(1.0, std::log(double(i + 1)) / std::log(double(trainLength)));
}

std::vector<std::pair<int64_t, int64_t>> ContextExtension::keyRanges(int64_t q0, int64_t q1) const {
  if (recentDistance() == 0) return {{0, q1}};
  // The recent keys start at the first one the block's first query sees.
  int64_t recent = std::max<int64_t>(q0 - recentDistance() + 1, 0), sinks = std::min(sinkTokens, q1);
  if (sinks >= recent) return {{0, q1}};
  return {{0, sinks}, {recent, q1}};
}

std::string ContextExtension::label() const {
  std::string s;
  switch (method) {
    case ExtensionMethod::None:
      s = logn ? "" : "none";
      break;
    case ExtensionMethod::Sinks:
      s = fmt::format("sinks S={} W={}", sinkTokens, window);
      break;
    case ExtensionMethod::Lambda:
      s = fmt::format("lambda global={} local={} limit={}", sinkTokens, window, distanceLimit);
      break;
    case ExtensionMethod::SelfExtend:
      s = fmt::format("self-extend G={} W={}", group, window);
      break;
    case ExtensionMethod::ReRope:
      s = fmt::format("rerope w={}", window);
      break;
    case ExtensionMethod::LeakyReRope:
      s = fmt::format("leaky-rerope w={} k={}", window, fmtNumber(leak));
      break;
  }
  if (logn) s += s.empty() ? "logn" : " + logn";
  return s;
}

namespace {

// "METHOD", "logn" or "METHOD+logn": the method and whether logn is on.
std::pair<ExtensionMethod, bool> parseExtensionName(const std::string& name) {
  std::string base = name;
  const std::string suffix = "+logn";
  bool logn = false;
  if (base.size() > suffix.size() && base.compare(base.size() - suffix.size(), suffix.size(), suffix) == 0) {
    logn = true;
    base.resize(base.size() - suffix.size());
  }
  if (base == "logn" && !logn) return {ExtensionMethod::None, true};
  auto it = std::find_if(methodTable().begin(), methodTable().end(), [&](const auto& m) { return m.first == base; });
  if (it == methodTable().end() || (logn && it->second == ExtensionMethod::None)) {
    std::string valid;
    for (const auto& n : extensionMethodNames()) valid += (valid.empty() ? "" : ", ") + n;
    throw std::invalid_argument("unknown --extend '" + name + "' (valid: " + valid + ", or METHOD+logn)");
  }
  return {it->second, logn};
}

}  // namespace

ContextExtension resolveContextExtension(const std::string& name, const ExtensionSettings& settings,
                                         int64_t trainLength) {
  if (trainLength < 2)
    throw std::invalid_argument("--extend needs the training length (>= 2), got " + std::to_string(trainLength));
  ContextExtension e;
  e.trainLength = trainLength;
  std::tie(e.method, e.logn) = parseExtensionName(name);
  auto positive = [](const char* what, int64_t v) {
    if (v < 0) throw std::invalid_argument(fmt::format("{} must be >= 1 (0 = its default), got {}", what, v));
  };
  positive("--extend-sinks", settings.sinkTokens);
  positive("--extend-window", settings.window);
  positive("--extend-group", settings.group);
  positive("--extend-limit", settings.distanceLimit);
  if (settings.leak < 0) throw std::invalid_argument("--extend-leak must be > 1 (0 = its default)");
  auto pick = [](int64_t set, int64_t fallback) { return set > 0 ? set : fallback; };
  const int64_t L = trainLength;
  switch (e.method) {
    case ExtensionMethod::Sinks:
      e.sinkTokens = pick(settings.sinkTokens, 4);
      e.window = pick(settings.window, L - e.sinkTokens);
      if (e.window < 1)
        throw std::invalid_argument(fmt::format("sinks: the window must be >= 1 key, got {}", e.window));
      break;
    case ExtensionMethod::Lambda:
      e.sinkTokens = pick(settings.sinkTokens, 10);
      e.window = pick(settings.window, L);
      e.distanceLimit = pick(settings.distanceLimit, e.window);
      break;
    case ExtensionMethod::SelfExtend:
      e.group = pick(settings.group, 8);
      e.window = pick(settings.window, std::max<int64_t>(1, L / 4));
      if (e.group < 2) throw std::invalid_argument(fmt::format("self-extend: G must be >= 2, got {}", e.group));
      break;
    case ExtensionMethod::ReRope:
    case ExtensionMethod::LeakyReRope:
      e.window = pick(settings.window, std::max<int64_t>(1, L / 8));
      if (e.method == ExtensionMethod::LeakyReRope) {
        e.leak = settings.leak > 0 ? settings.leak : 16.0;
        if (!(e.leak > 1)) throw std::invalid_argument("leaky-rerope: k must be > 1, got " + fmtNumber(e.leak));
      }
      break;
    case ExtensionMethod::None:
      break;
  }
  return e;
}

void checkExtensionSettingsUsed(const std::vector<std::string>& names, const ExtensionSettings& settings) {
  bool sinks = false, window = false, group = false, leak = false, limit = false;
  for (const auto& name : names) {
    ExtensionMethod m = parseExtensionName(name).first;
    sinks |= m == ExtensionMethod::Sinks || m == ExtensionMethod::Lambda;
    window |= m != ExtensionMethod::None;
    group |= m == ExtensionMethod::SelfExtend;
    leak |= m == ExtensionMethod::LeakyReRope;
    limit |= m == ExtensionMethod::Lambda;
  }
  auto check = [](bool used, bool set, const char* option, const char* methods) {
    if (set && !used) throw std::invalid_argument(fmt::format("{} applies to --extend {} only", option, methods));
  };
  check(sinks, settings.sinkTokens != 0, "--extend-sinks", "sinks or lambda");
  check(window, settings.window != 0, "--extend-window", "sinks, lambda, self-extend, rerope or leaky-rerope");
  check(group, settings.group != 0, "--extend-group", "self-extend");
  check(leak, settings.leak != 0, "--extend-leak", "leaky-rerope");
  check(limit, settings.distanceLimit != 0, "--extend-limit", "lambda");
}

void checkExtensionApplies(const ContextExtension& extension, PositionMethod pos, bool causal, bool slidingWindow) {
  if (!extension.active()) return;
  const std::string what = "--extend " + extension.label();
  bool maskOnly = extension.method == ExtensionMethod::Sinks || extension.method == ExtensionMethod::Lambda;
  if (!causal && maskOnly)
    throw std::invalid_argument(what + ": defined for decoders only (a cache of the first and the latest tokens)");
  if (slidingWindow) throw std::invalid_argument(what + ": not with sliding-window attention layers");
  bool relative = pos == PositionMethod::Rotary || isLinearBias(pos) || pos == PositionMethod::T5 ||
                  pos == PositionMethod::KerpleLog || pos == PositionMethod::Fire;
  bool takesPositions = relative || (pos == PositionMethod::None && maskOnly);
  if (extension.hasFarPositions() && !takesPositions)
    throw std::invalid_argument(what + ": not defined for position method " + positionMethodName(pos) +
                                " (re-assigned positions need a relative method: rotary, the ALiBi family, T5, "
                                "kerple-log, fire; none takes sinks and lambda, every method takes logn)");
}

}  // namespace xtrap
