#include "dist/dist_group.h"

#include <fmt/format.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <stdexcept>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "util/interrupt.h"
#ifdef XTRAP_WITH_GLOO
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#endif
#ifdef XTRAP_WITH_NCCL
#include <c10/cuda/CUDAFunctions.h>

#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

namespace xtrap {

namespace {

// Rank 0 hosting the store: a port already taken is named in one line here, before c10d would
// log its failed binds to stderr line by line (a bind between this check and the store's still
// fails, just more verbosely).
void requirePortFree(const DistEnv& env) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return;
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));  // as TCPStore binds
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(env.masterPort));
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  bool taken = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 && errno == EADDRINUSE;
  ::close(fd);
  if (taken)
    throw std::runtime_error(
        fmt::format("port {} is already in use (another job or program listens there)", env.masterPort));
}

c10::intrusive_ptr<c10d::Store> connectStore(const DistEnv& env, bool server) {
  if (server) requirePortFree(env);
  c10d::TCPStoreOptions options;
  options.port = static_cast<uint16_t>(env.masterPort);
  options.isServer = server;
  options.waitWorkers = false;
  options.timeout = DistGroup::kTimeout;
  return c10::make_intrusive<c10d::TCPStore>(env.masterAddr, options);
}

// One store connection per process for the collectives' rendezvous; rank 0 hosts the server
// unless the launcher does (TORCHELASTIC_USE_AGENT_STORE=True).
c10::intrusive_ptr<c10d::Store> processStore(const DistEnv& env) {
  static c10::intrusive_ptr<c10d::Store> store = connectStore(env, env.rank == 0 && !env.agentStore);
  return store;
}

bool isLoopback(const std::string& addr) { return addr == "localhost" || addr.rfind("127.", 0) == 0; }

std::string firstLine(const std::string& text) { return text.substr(0, text.find('\n')); }

std::string heartbeatKey(int rank) { return fmt::format("heartbeat/{}", rank); }

// "xtrap: error: DESCRIPTION: CAUSE" and exit status 1, from the first thread that comes here; a
// later one waits for that exit. While a rank joins, two threads can see the store fail at once
// (when what listens at MASTER_PORT is no store and closes): the joiner's call and a LibTorch
// background thread. Each used to print its own line, in either order.
std::atomic<bool> gFailureReported{false};
[[noreturn]] void reportOnceAndExit(const char* description, const std::string& cause) {
  if (!gFailureReported.exchange(true)) {
    std::fprintf(stderr, "xtrap: error: %s: %s\n", description, cause.c_str());
    std::_Exit(1);
  }
  for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
}

// What a rank says when a LibTorch background thread (the store's callback client) dies of an
// exception, which would otherwise abort with "terminate called ...": while the rank joins, that
// it cannot join; afterwards, that it lost the store.
char gCannotJoin[160], gLostStore[160];
std::atomic<bool> gJoining{false};
[[noreturn]] void onBackgroundFailure() {
  std::string what = "unknown error";
  if (auto error = std::current_exception()) {
    try {
      std::rethrow_exception(error);
    } catch (const std::exception& e) {
      what = firstLine(e.what());
    } catch (...) {
    }
  }
  reportOnceAndExit(gJoining ? gCannotJoin : gLostStore, what);
}

}  // namespace

DistGroup::DistGroup(const DistEnv& env, torch::Device device) : env_(env), device_(device) {
  if (!env_.launched) return;
  static int groupsMade = 0;  // the same sequence on every rank
  // The job id keeps a rank that reached another job's store (a reused MASTER_PORT) out of it.
  std::string prefix = fmt::format("xtrap/{}/group{}", env_.jobId, groupsMade++);
  const std::string where = fmt::format("{}:{} (MASTER_PORT)", env_.masterAddr, env_.masterPort);
  *fmt::format_to_n(gCannotJoin, sizeof(gCannotJoin) - 1, "rank {}: cannot join the job at {}", env_.rank, where).out =
      '\0';
  *fmt::format_to_n(gLostStore, sizeof(gLostStore) - 1, "rank {}: lost the job's store at {}", env_.rank, where).out =
      '\0';
  gJoining = true;
  std::set_terminate(onBackgroundFailure);
  // Joining blocks inside LibTorch (connecting, the rendezvous), where no signal is seen; it runs
  // on a helper thread so that this one can honour SIGINT/SIGTERM meanwhile (join() keeps the time limit).
  std::exception_ptr error;
  std::atomic<bool> joined{false};
  std::thread joiner([&] {
    try {
      join(prefix);
    } catch (...) {
      error = std::current_exception();
    }
    joined = true;
  });
  while (!joined) {
    if (int signal = interruptSignal()) {
      // Nothing is written yet, and the helper cannot be stopped: leave at once.
      std::fprintf(stderr, "xtrap: interrupted by %s while rank %d was joining the job at %s\n",
                   signalName(signal).c_str(), env_.rank, where.c_str());
      std::_Exit(128 + signal);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  joiner.join();
  if (error) {
    // Nothing is written yet; the one line, whichever thread saw the failure first.
    try {
      std::rethrow_exception(error);
    } catch (const c10::Error& e) {
      reportOnceAndExit(gCannotJoin, firstLine(e.what_without_backtrace()));
    } catch (const std::exception& e) {
      reportOnceAndExit(gCannotJoin, firstLine(e.what()));
    }
  }
  gJoining = false;
  heartbeat_ = std::thread([this] { heartbeatLoop(); });
}

void DistGroup::join(const std::string& prefix) {
  store_ = c10::make_intrusive<c10d::PrefixStore>(prefix, processStore(env_));
  heartbeatStore_ = c10::make_intrusive<c10d::PrefixStore>(prefix, connectStore(env_, false));
  // Every rank of this job checks in before the rendezvous, which would otherwise wait for the
  // whole timeout inside Gloo for a rank that never comes.
  store_->add("arrived", 1);
  auto deadline = std::chrono::steady_clock::now() + kTimeout;
  for (int64_t arrived; (arrived = store_->add("arrived", 0)) < env_.world;) {
    if (std::chrono::steady_clock::now() > deadline)
      throw std::runtime_error(
          fmt::format("only {} of {} ranks of job '{}' arrived within {} s (is the port another "
                      "job's, or did a rank fail to start?)",
                      arrived, env_.world, env_.jobId, kTimeout.count()));
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  if (device_.is_cuda()) {
#ifdef XTRAP_WITH_NCCL
    c10::cuda::set_device(static_cast<c10::DeviceIndex>(env_.localRank));
    auto options = c10d::ProcessGroupNCCL::Options::create();
    options->timeout = kTimeout;
    group_ = c10::make_intrusive<c10d::ProcessGroupNCCL>(store_, env_.rank, env_.world, options);
#else
    throw std::runtime_error("this LibTorch has no NCCL: distributed CUDA runs are not available");
#endif
  } else {
#ifdef XTRAP_WITH_GLOO
    auto options = c10d::ProcessGroupGloo::Options::create(kTimeout);
    const char* iface = std::getenv("GLOO_SOCKET_IFNAME");
    if (iface != nullptr && *iface != '\0')
      options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(iface));
    else if (isLoopback(env_.masterAddr))
      options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
    else
      options->devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
    group_ = c10::make_intrusive<c10d::ProcessGroupGloo>(store_, env_.rank, env_.world, options);
#else
    throw std::runtime_error(
        "this xtrap was built against a LibTorch without Gloo's headers (a pip wheel's): distributed "
        "CPU runs are not available; run on CUDA (NCCL) or build against a LibTorch with them");
#endif
  }
}

DistGroup::~DistGroup() {
  stopHeartbeat_ = true;
  if (heartbeat_.joinable()) heartbeat_.join();
}

void DistGroup::heartbeatLoop() {
  while (!stopHeartbeat_) {
    try {
      heartbeatStore_->add(heartbeatKey(env_.rank), 1);
    } catch (const std::exception&) {
      return;  // the store is gone; fail() reports it when a collective notices
    }
    for (int i = 0; i < 10 && !stopHeartbeat_; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

void DistGroup::fail(const std::exception& error) {
  std::string cause = firstLine(error.what());
  if (auto* c10error = dynamic_cast<const c10::Error*>(&error)) cause = firstLine(c10error->what_without_backtrace());
  std::string lost;
  try {
    // A live rank's counter grows once a second; read all of them twice, 3 s apart.
    std::vector<int64_t> before(static_cast<size_t>(env_.world));
    for (int r = 0; r < env_.world; ++r) before[size_t(r)] = store_->add(heartbeatKey(r), 0);
    std::this_thread::sleep_for(std::chrono::seconds(3));
    for (int r = 0; r < env_.world; ++r)
      if (r != env_.rank && store_->add(heartbeatKey(r), 0) == before[size_t(r)])
        lost += (lost.empty() ? "" : ", ") + std::to_string(r);
    if (!lost.empty()) lost = "rank " + lost + " stopped; ";  // empty: every rank is alive
  } catch (const std::exception&) {
    lost = env_.agentStore ? "the launcher's store is gone; " : "rank 0 stopped (it hosted the rendezvous store); ";
  }
  throw std::runtime_error(fmt::format("rank {}: {}a collective failed: {}", env_.rank, lost, cause));
}

// Runs one call into c10d; its failure becomes the one-line error of fail().
template <class Call>
auto DistGroup::guarded(Call&& call) {
  try {
    return call();
  } catch (const std::exception& e) {
    fail(e);
  }
}

void DistGroup::allreduceSum(torch::Tensor& tensor) {
  if (!group_) return;
  guarded([&] {
    // NCCL reduces device tensors only; host-side counters and flags travel through the device.
    std::vector<torch::Tensor> tensors{tensor.to(device_)};
    group_->allreduce(tensors)->wait();
    if (!tensors[0].is_same(tensor)) tensor.copy_(tensors[0]);
  });
}

c10::intrusive_ptr<c10d::Work> DistGroup::allreduceAsync(torch::Tensor& tensor) {
  return guarded([&] {
    std::vector<torch::Tensor> tensors{tensor};
    return group_->allreduce(tensors);
  });
}

torch::Tensor DistGroup::allgather(const torch::Tensor& tensor) {
  if (!group_) return tensor;
  return guarded([&] {
    std::vector<torch::Tensor> input{tensor.to(device_).contiguous()};
    std::vector<std::vector<torch::Tensor>> output(1);
    for (int r = 0; r < world(); ++r) output[0].push_back(torch::empty_like(input[0]));
    group_->allgather(output, input)->wait();
    return torch::cat(output[0]).to(tensor.device());
  });
}

void DistGroup::broadcast(torch::Tensor& tensor, int root) {
  if (!group_) return;
  std::vector<torch::Tensor> tensors{tensor};
  c10d::BroadcastOptions options;
  options.rootRank = root;
  guarded([&] { group_->broadcast(tensors, options)->wait(); });
}

void DistGroup::send(torch::Tensor& tensor, int to) {
  if (!group_) return;
  std::vector<torch::Tensor> tensors{tensor};
  guarded([&] { group_->send(tensors, to, /*tag=*/0)->wait(); });
}

void DistGroup::receive(torch::Tensor& tensor, int from) {
  if (!group_) return;
  std::vector<torch::Tensor> tensors{tensor};
  guarded([&] { group_->recv(tensors, from, /*tag=*/0)->wait(); });
}

void DistGroup::wait(const c10::intrusive_ptr<c10d::Work>& work) {
  guarded([&] { work->wait(); });
}

void DistGroup::barrier() {
  if (!group_) return;
  guarded([&] { group_->barrier()->wait(); });
}

}  // namespace xtrap
