// protocol_windows PROTOCOL N LVALID STRIDE BOS [DOCUMENT-START...]: xtrap's side of
// tests/protocol_check.py. Prints the windows protocolWindows gives for a stream of N tokens, one
// "start length scoreFrom scoreTo contextFirst" line each (eval/window_protocol.h), or the one-line
// error on stderr with exit status 1.
#include <cstdio>
#include <exception>
#include <string>

#include "eval/window_protocol.h"

int main(int argc, char** argv) {
  if (argc < 6) {
    std::fprintf(stderr, "usage: protocol_windows PROTOCOL N LVALID STRIDE BOS [DOCUMENT-START...]\n");
    return 2;
  }
  try {
    xtrap::WindowPlan plan;
    plan.protocol = xtrap::parseWindowProtocol(argv[1]);
    plan.Lvalid = std::stoll(argv[3]);
    plan.stride = std::stoll(argv[4]);
    plan.bos = std::string(argv[5]) == "1";
    for (int i = 6; i < argc; ++i) plan.documentStarts.push_back(std::stoll(argv[i]));
    for (const auto& w : xtrap::protocolWindows(plan, std::stoll(argv[2])))
      std::printf("%lld %lld %lld %lld %d\n", static_cast<long long>(w.start), static_cast<long long>(w.length),
                  static_cast<long long>(w.scoreFrom), static_cast<long long>(w.scoreTo), w.contextFirst ? 1 : 0);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  return 0;
}
