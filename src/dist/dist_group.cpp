#include "dist/dist_group.h"

#include <fmt/format.h>

#include <stdexcept>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#ifdef XTRAP_WITH_NCCL
#include <c10/cuda/CUDAFunctions.h>

#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

namespace xtrap {

namespace {

c10::intrusive_ptr<c10d::Store> connectStore(const DistEnv& env, bool server) {
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

}  // namespace

DistGroup::DistGroup(const DistEnv& env, torch::Device device) : env_(env), device_(device) {
  if (!env_.launched) return;
  static int groupsMade = 0;  // the same sequence on every rank
  std::string prefix = fmt::format("xtrap/group{}", groupsMade++);
  try {
    store_ = c10::make_intrusive<c10d::PrefixStore>(prefix, processStore(env_));
    heartbeatStore_ = c10::make_intrusive<c10d::PrefixStore>(prefix, connectStore(env_, false));
    if (device.is_cuda()) {
#ifdef XTRAP_WITH_NCCL
      c10::cuda::set_device(static_cast<c10::DeviceIndex>(env_.localRank));
      auto options = c10d::ProcessGroupNCCL::Options::create();
      options->timeout = kTimeout;
      group_ = c10::make_intrusive<c10d::ProcessGroupNCCL>(store_, env_.rank, env_.world, options);
#else
      throw std::runtime_error("this LibTorch has no NCCL: distributed CUDA runs are not available");
#endif
    } else {
      auto options = c10d::ProcessGroupGloo::Options::create(kTimeout);
      const char* iface = std::getenv("GLOO_SOCKET_IFNAME");
      if (iface != nullptr && *iface != '\0')
        options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(iface));
      else if (isLoopback(env_.masterAddr))
        options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
      else
        options->devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
      group_ = c10::make_intrusive<c10d::ProcessGroupGloo>(store_, env_.rank, env_.world, options);
    }
  } catch (const c10::Error& e) {
    throw std::runtime_error(fmt::format("rank {}: cannot join the job at {}:{}: {}", env_.rank, env_.masterAddr,
                                         env_.masterPort, firstLine(e.what_without_backtrace())));
  }
  heartbeat_ = std::thread([this] { heartbeatLoop(); });
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

void DistGroup::allreduceSum(torch::Tensor& tensor) {
  if (!group_) return;
  try {
    // NCCL reduces device tensors only; host-side counters and flags travel through the device.
    std::vector<torch::Tensor> tensors{tensor.to(device_)};
    group_->allreduce(tensors)->wait();
    if (!tensors[0].is_same(tensor)) tensor.copy_(tensors[0]);
  } catch (const std::exception& e) {
    fail(e);
  }
}

c10::intrusive_ptr<c10d::Work> DistGroup::allreduceAsync(torch::Tensor& tensor) {
  try {
    std::vector<torch::Tensor> tensors{tensor};
    return group_->allreduce(tensors);
  } catch (const std::exception& e) {
    fail(e);
  }
}

void DistGroup::wait(const c10::intrusive_ptr<c10d::Work>& work) {
  try {
    work->wait();
  } catch (const std::exception& e) {
    fail(e);
  }
}

void DistGroup::barrier() {
  if (!group_) return;
  try {
    group_->barrier()->wait();
  } catch (const std::exception& e) {
    fail(e);
  }
}

}  // namespace xtrap
