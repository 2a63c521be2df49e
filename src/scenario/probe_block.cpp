#include "scenario/probe_block.h"

#include <fmt/format.h>

#include <algorithm>

#include "model/position_method.h"
#include "scenario/variant_keys.h"

namespace xtrap {

ScenarioProbe parseProbe(const ScenarioSource& src, const toml::table& t,
                         const std::vector<ScenarioVariant>& variants) {
  static const std::set<std::string> known = {"bias_len", "attn_lvalid", "attn_offset", "stats_only", "variants"};
  rejectUnknown(src, t, "[probe]", known);
  ScenarioProbe p;
  for (auto&& [k, node] : t) {
    std::string key(k.str());
    TomlValue v{src, key, node};
    if (key == "bias_len") {
      p.biasLen = v.integer();
      if (p.biasLen < 1 || p.biasLen > 8192) v.fail("must be in 1..8192");
    } else if (key == "attn_lvalid") {
      p.attnLvalid = v.integer();
      if (p.attnLvalid < 1 || p.attnLvalid > (1 << 20)) v.fail("must be in 1..1048576");
    } else if (key == "attn_offset") {
      p.attnOffset = v.integer();
      if (p.attnOffset < 0) v.fail("must be >= 0");
    } else if (key == "stats_only") {
      p.statsOnly = v.boolean();
    } else if (key == "variants") {
      p.variants = v.strings();
      checkVariantNames(v, p.variants, variants);
    }
  }
  if (p.biasLen == 0 && p.attnLvalid == 0) src.fail(t.source(), "[probe] needs bias_len or attn_lvalid");
  for (const ScenarioVariant& v : variants) {
    bool selected = p.variants.empty() || std::find(p.variants.begin(), p.variants.end(), v.name) != p.variants.end();
    if (selected && v.model.position() == PositionMethod::Learned && p.attnLvalid > v.model.positionTableSize())
      src.fail(t.source(), fmt::format("[probe] variant '{}': attn_lvalid {} exceeds its learned position table of {} "
                                       "rows (set max_positions)",
                                       v.name, p.attnLvalid, v.model.positionTableSize()));
  }
  return p;
}

}  // namespace xtrap
