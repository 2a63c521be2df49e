#include "cli/commands.h"

namespace xtrap {

void addExtensionSettingOptions(CLI::App& cmd, ExtensionSettings& settings) {
  cmd.add_option("--extend-sinks", settings.sinkTokens,
                 "sinks: the first S keys every query sees (default 4); lambda: n_global (default 10)");
  cmd.add_option("--extend-window", settings.window,
                 "sinks: the recent keys W (default L_train - S); lambda: L_local (L_train); self-extend: the "
                 "neighbour window W (L_train / 4); rerope, leaky-rerope: w (L_train / 8)");
  cmd.add_option("--extend-group", settings.group, "self-extend: the group size G (default 8)");
  cmd.add_option("--extend-leak", settings.leak,
                 "leaky-rerope: k, distances beyond w grow by 1/k a token (default 16)");
  cmd.add_option("--extend-limit", settings.distanceLimit,
                 "lambda: the distance a global key is seen at, at most (default L_local)");
}

}  // namespace xtrap
