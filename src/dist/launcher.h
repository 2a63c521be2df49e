#pragma once
// `--nproc N`: runs this executable N times on this machine as ranks 0..N-1 of one job, the way
// torchrun would: the same arguments, the torchrun environment (RANK, LOCAL_RANK, WORLD_SIZE,
// MASTER_ADDR=127.0.0.1, MASTER_PORT), and a TCPStore hosted here on a free loopback port
// (TORCHELASTIC_USE_AGENT_STORE=True), so the store outlives any one rank.
namespace xtrap {

// True when this process is already a rank of a job (WORLD_SIZE is set): --nproc is then ignored.
bool insideDistributedJob();

// Starts the ranks and waits for all of them. The ranks die with the launcher (parent-death
// signal), even on kill -9. SIGINT/SIGTERM received here are passed on once; when the ranks stop
// for it, Interrupted is thrown with no message (rank 0 printed where the run stands). When a
// rank fails, the others get kLaunchGrace to notice and exit, then are killed; the first failure
// is thrown as a one-line std::runtime_error naming the rank.
void launchLocalRanks(int nproc);

}  // namespace xtrap
