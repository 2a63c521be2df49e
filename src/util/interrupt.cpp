#include "util/interrupt.h"

#include <unistd.h>

#include <csignal>

namespace xtrap {
namespace {

volatile std::sig_atomic_t gSignal = 0;
thread_local int gDeferrals = 0;

extern "C" void onInterrupt(int signal) {
  if (gSignal != 0) _exit(128 + signal);  // the user insists: no cleanup
  gSignal = signal;
}

}  // namespace

void installInterruptHandlers() {
  struct sigaction action {};
  action.sa_handler = onInterrupt;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
}

int interruptSignal() { return gSignal; }

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
