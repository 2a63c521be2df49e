#include "model/named_configs.h"

#include <stdexcept>

namespace xtrap {
namespace {
struct Named {
  std::string name, pos, head;
};
const std::vector<Named>& table() {
  static const std::vector<Named> t = {{"baseline", "learned", "roberta"},
                                       {"learned-clap", "learned", "clap"},
                                       {"alibi", "alibi-offset", "roberta"},
                                       {"zero-clap", "alibi-offset", "clap"}};
  return t;
}
}  // namespace

void applyNamedConfig(const std::string& name, ModelConfig& c) {
  for (const auto& n : table()) {
    if (n.name != name) continue;
    c.arch = "encoder";
    c.pos = n.pos;
    c.head = n.head;
    return;
  }
  throw std::invalid_argument("unknown --config '" + name + "' (valid: baseline, learned-clap, alibi, zero-clap)");
}

const std::vector<std::string>& namedConfigNames() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    for (const auto& n : table()) v.push_back(n.name);
    return v;
  }();
  return names;
}

}  // namespace xtrap
