#include <fmt/format.h>

#include <chrono>

#include "cli/commands.h"
#include "data/wikitext.h"

namespace xtrap {

CommandAction addDataCommand(CLI::App& cmd) {
  auto dir = std::make_shared<std::string>(defaultDataDir().string());
  cmd.add_option("dir", *dir, "WikiText-format directory (wiki.{train,valid,test}.tokens)")->capture_default_str();
  return [=] {
    auto start = std::chrono::steady_clock::now();
    Corpus c = loadWikiText(*dir);
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    fmt::print("{}: {} train, {} valid, {} test tokens; {} words; data digest {}; loaded in {:.2f} s\n", *dir,
               c.train.size(), c.valid.size(), c.test.size(), c.vocab.size(), c.digest, seconds);
  };
}

}  // namespace xtrap
