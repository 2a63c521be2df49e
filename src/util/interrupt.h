#pragma once
// SIGINT / SIGTERM handling. The first signal only sets a flag: long loops (training steps,
// evaluation batches, attention blocks) poll it and unwind with Interrupted, so RAII removes
// temporary files and training writes a checkpoint first. A second signal exits at once.
#include <stdexcept>
#include <string>

namespace xtrap {

class Interrupted : public std::runtime_error {
 public:
  Interrupted(int signal, const std::string& what) : std::runtime_error(what), signal_(signal) {}
  int signal() const { return signal_; }
  int exitCode() const { return 128 + signal_; }  // the shell convention for "killed by signal"

 private:
  int signal_;
};

void installInterruptHandlers();
int interruptSignal();  // 0 while no SIGINT/SIGTERM has arrived
// The signal a rank of a job stops for once the ranks have agreed whether any of them got one:
// its own, SIGTERM where only another rank did, 0 where none did.
int agreedStopSignal(int localSignal, bool anyRankSignalled);
std::string signalName(int signal);
// Throws Interrupted ("interrupted by SIGINT") once a signal has arrived, unless deferred.
void throwIfInterrupted();

// While one exists, throwIfInterrupted() does not throw: training validates inside a step and
// handles the signal itself at the step boundary, after a checkpoint.
class DeferInterrupts {
 public:
  DeferInterrupts();
  ~DeferInterrupts();
  DeferInterrupts(const DeferInterrupts&) = delete;
  DeferInterrupts& operator=(const DeferInterrupts&) = delete;
};

}  // namespace xtrap
