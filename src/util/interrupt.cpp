#include "util/interrupt.h"

#include <unistd.h>

#include <csignal>
#include <cstring>

namespace xtrap {
namespace {

volatile std::sig_atomic_t gSignal = 0;
thread_local int gDeferrals = 0;

extern "C" void onInterrupt(int signal) {
  if (gSignal != 0) {  // the user insists: no cleanup, but say so (write(2) is async-signal-safe)
    const char* text = signal == SIGINT ? "xtrap: second SIGINT: stopped at once, without cleanup\n"
                                        : "xtrap: second SIGTERM: stopped at once, without cleanup\n";
    [[maybe_unused]] ssize_t written = write(STDERR_FILENO, text, std::strlen(text));
    _exit(128 + signal);
  }
  gSignal = signal;
}

}  // namespace

void installInterruptHandlers() {
  struct sigaction action {};
  action.sa_handler = onInterrupt;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
  // A parent may have blocked them (the mask survives exec): a signal sent while blocked waits
  // pending and arrives here, so it is honoured, never lost.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigprocmask(SIG_UNBLOCK, &set, nullptr);
}

int interruptSignal() { return gSignal; }

int agreedStopSignal(int localSignal, bool anyRankSignalled) {
  if (!anyRankSignalled) return 0;
  return localSignal != 0 ? localSignal : SIGTERM;
}

std::string signalName(int signal) {
  if (signal == SIGINT) return "SIGINT";
  if (signal == SIGTERM) return "SIGTERM";
  return "signal " + std::to_string(signal);
}

void throwIfInterrupted() {
  if (gDeferrals > 0) return;
  if (int s = gSignal) throw Interrupted(s, "interrupted by " + signalName(s));
}

DeferInterrupts::DeferInterrupts() { ++gDeferrals; }
DeferInterrupts::~DeferInterrupts() { --gDeferrals; }

}  // namespace xtrap
