#pragma once
// OpenMP threads that sleep at barriers instead of spinning.
// libgomp's default lets a thread that waits at a barrier spin for ~300k iterations first. When
// the machine has more runnable threads than cores (shared machines, several runs at once),
// those spinning threads take the cores from the threads doing the work: on the 2-core shared
// development machine training ran ~5x slower than with passive waiting (results/perf.md).
// libgomp reads its settings only when it is loaded, so they cannot be changed from main();
// the process re-executes itself once with the setting in its environment.
namespace xtrap {

// Unless the user set OMP_WAIT_POLICY or GOMP_SPINCOUNT: sets OMP_WAIT_POLICY=passive and
// re-executes argv (Linux, /proc/self/exe); returns normally if that is not possible.
void reexecWithPassiveOmpWait(char** argv);

}  // namespace xtrap
