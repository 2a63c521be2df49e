#include "model/named_configs.h"

#include <stdexcept>

#include "util/choices.h"

namespace xtrap {
namespace {

struct Named {
  std::string name;
  bool encoderSeed;
  std::function<void(ModelConfig&, const FlagGiven&)> apply;
};

template <class T>
void set(const FlagGiven& given, const char* flag, T& field, const T& value) {
  if (!given || !given(flag)) field = value;
}

std::function<void(ModelConfig&, const FlagGiven&)> encoderSeed(std::string pos, std::string head) {
  return [pos, head](ModelConfig& c, const FlagGiven&) {
    c.arch = "encoder";
    c.pos = pos;
    c.head = head;
  };
}

void paperWt103(ModelConfig& c, const FlagGiven& g) {
  set<std::string>(g, "--arch", c.arch, "decoder");
  set<std::string>(g, "--pos", c.pos, "alibi");
  set<std::string>(g, "--head", c.head, "lm");
  set<int64_t>(g, "--L", c.contextLength, 512);
  set<int64_t>(g, "--layers", c.layers, 16);
  set<int64_t>(g, "--d-model", c.dModel, 1024);
  set<int64_t>(g, "--heads", c.heads, 8);
  set<int64_t>(g, "--ffn", c.ffn, 4096);
  set<std::string>(g, "--activation", c.activation, "relu");
  set<bool>(g, "--no-final-norm", c.finalNorm, false);
  set<double>(g, "--dropout", c.dropout, 0.3);
  set<std::optional<double>>(g, "--attention-dropout", c.attentionDropout, 0.1);
  set<std::optional<double>>(g, "--activation-dropout", c.activationDropout, 0.1);
  set<std::vector<int64_t>>(g, "--adaptive-softmax", c.adaptiveSoftmaxCutoffs, {20000, 60000});
  set<double>(g, "--adaptive-softmax-dropout", c.adaptiveSoftmaxDropout, 0.2);
  set<bool>(g, "--adaptive-input", c.adaptiveInput, true);
  set<bool>(g, "--no-scale-embedding", c.scaleEmbedding, true);  // fairseq: sqrt(d) embedding scale
}

const std::vector<Named>& table() {
  static const std::vector<Named> t = {{"baseline", true, encoderSeed("learned", "roberta")},
                                       {"learned-clap", true, encoderSeed("learned", "clap")},
                                       {"alibi", true, encoderSeed("alibi-offset", "roberta")},
                                       {"zero-clap", true, encoderSeed("alibi-offset", "clap")},
                                       {"paper-wt103", false, paperWt103}};
  return t;
}

const Named& find(const std::string& name) {
  for (const auto& n : table())
    if (n.name == name) return n;
  checkName(namedConfigNames(), name, "--config");
  throw std::logic_error("named config table and names disagree");
}

std::vector<std::string> names(bool encoderSeedsOnly) {
  std::vector<std::string> v;
  for (const auto& n : table())
    if (!encoderSeedsOnly || n.encoderSeed) v.push_back(n.name);
  return v;
}

}  // namespace

void applyNamedConfig(const std::string& name, ModelConfig& c, const FlagGiven& given) { find(name).apply(c, given); }

bool namedConfigFixesPositionAndHead(const std::string& name) { return find(name).encoderSeed; }

const std::vector<std::string>& namedConfigNames() {
  static const std::vector<std::string> all = names(false);
  return all;
}

const std::vector<std::string>& encoderSeedConfigNames() {
  static const std::vector<std::string> seeds = names(true);
  return seeds;
}

}  // namespace xtrap
