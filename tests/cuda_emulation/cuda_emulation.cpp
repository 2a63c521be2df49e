// The CPU runtime behind cuda_emulation.h: launches, the fiber scheduler of a block, barriers,
// shuffles and the checks. One block at a time, on the calling thread.
//
// _longjmp between fiber stacks is what _FORTIFY_SOURCE's __longjmp_chk rejects ("longjmp causes
// uninitialized stack frame"), and compilers such as Ubuntu's define it by default; before any
// include, so that <csetjmp> declares the unchecked _longjmp.
#undef _FORTIFY_SOURCE
#include "cuda_emulation.h"

#include <sys/mman.h>
#include <ucontext.h>

#include <csetjmp>
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/common_interface_defs.h>
#endif

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <initializer_list>
#include <map>
#include <vector>

uint3 threadIdx, blockIdx;
dim3 blockDim, gridDim;

namespace cuda_emulation {
namespace {

constexpr size_t kDefaultDynamicSharedBytes = 48 * 1024;
constexpr int kMaxThreads = 1024;
constexpr size_t kStackBytes = 256 * 1024;  // a thread's locals: the kernels' register tiles, 1-2 KiB
constexpr size_t kPageBytes = 4096;
constexpr unsigned char kPoison = 0xFF;  // NaN in every float and bf16 that reads it
constexpr unsigned char kGuard = 0xA5;
constexpr size_t kSlotBytes = 32;  // a lane's share of a warp collective: mma's 6 registers fit

// An asynchronous copy (cp.async): size bytes, the last zfill of them zeros.
struct AsyncCopy {
  unsigned char* dst;
  const unsigned char* src;
  size_t size, zfill;
};

void land(const AsyncCopy& c) {
  std::memcpy(c.dst, c.src, c.size - c.zfill);
  std::memset(c.dst + c.size - c.zfill, 0, c.zfill);
}

// A warpgroup product issued by one thread (wgmma.mma_async): its accumulators, its A (the warp's
// 16 rows, exchanged at the issue) or A's descriptor, and B's.
struct WarpgroupProduct {
  float* d;  // [8][4]
  // An A in registers: this lane's 4 (which must hold aIssued until the wait), and the warp's
  // whole (16, 16); nullptr where A is read through aDescriptor.
  const uint32_t* aRegisters;
  float a[16][16];
  uint64_t aDescriptor, bDescriptor;
  bool aMnMajor, bMnMajor;
  bool accumulate;  // scale-d: d += A B, or d = A B
  uint32_t aIssued[4] = {};
  bool computed = false;  // at the issue (the descending schedule)
  bool aInRegisters() const { return aRegisters != nullptr; }
};

constexpr uint64_t kTraceSeed = 0xcbf29ce484222325ULL;  // FNV-1a's offset basis

// The trace with one more value (FNV-1a over its 8 bytes).
uint64_t traced(uint64_t trace, uint64_t value) {
  for (int byte = 0; byte < 8; ++byte) trace = (trace ^ ((value >> (8 * byte)) & 0xFFu)) * 0x100000001b3ULL;
  return trace;
}

// Where a thread of the running block stands.
enum class Wait { None, Warp, Block, Done };

// A thread starts on its own stack through setcontext and switches afterwards through
// _setjmp/_longjmp, which save no signal mask: swapcontext's sigprocmask system call on every
// switch made the emulated kernels several times slower.
struct Thread {
  ucontext_t start;
  jmp_buf resume;
  bool started = false;
  Wait wait = Wait::None;
  unsigned exchangeParity = 0;                 // which of its warp's two exchange rows its next collective uses
  std::vector<AsyncCopy> openBatch;            // queued since its last __pipeline_commit
  std::deque<std::vector<AsyncCopy>> batches;  // committed, not yet waited for (oldest first)
  bool warpgroupFenced = false;                // wgmma.fence since its last wgmma.wait_group
  std::vector<WarpgroupProduct> openProducts;  // issued since its last wgmma.commit_group
  std::deque<std::vector<WarpgroupProduct>> productGroups;  // committed, not yet waited for
  // Its warpgroup instructions in order (kind, descriptors, transposes), hashed: every thread of a
  // warpgroup must issue the same ones.
  uint64_t warpgroupTrace = kTraceSeed;
  size_t warpgroupInstructions = 0;
  bool proxyFenced = false;  // fence.proxy.async since the async proxy's view was last brought up to date
};

struct Runtime {
  unsigned char* shared = nullptr;
  size_t sharedBytes = 0;
  Schedule schedule = Schedule::Ascending;
  std::map<const void*, size_t> maxDynamicShared;  // set by cudaFuncSetAttribute
  cudaError_t lastError = cudaSuccess;
  std::string fault;

  // The block being run.
  int threadCount = 0;
  std::vector<Thread> threads;
  std::vector<unsigned char*> stacks;  // each kStackBytes above a guard page
  jmp_buf scheduler;
  int current = -1;
  const std::function<void()>* body = nullptr;
  size_t launchSharedBytes = 0;  // the running launch's dynamic shared memory
  // Shared memory as the async proxy (wgmma's operand reads) last saw it: brought up to date when
  // every thread of the block has run fence.proxy.async since the last time.
  std::vector<unsigned char> asyncView;
  // Per warp, two rows of 32 slots for its collectives (shuffles, mma, ldmatrix), used
  // alternately: a lane writes its slot of row p, waits for its warp, reads the row. Row p is
  // written again only two collectives later, after a wait that every lane reaches after its read.
  std::vector<std::array<std::array<std::array<unsigned char, kSlotBytes>, 32>, 2>> exchange;
};

Runtime& runtime() {
  static Runtime r;
  return r;
}

Thread& currentThread() { return runtime().threads[size_t(runtime().current)]; }

// The scheduler's stack, as AddressSanitizer knows it (learnt on a thread's first entry).
const void* schedulerStackBottom = nullptr;
size_t schedulerStackBytes = 0;

// AddressSanitizer follows the switches between stacks when told (its fiber API): before a switch
// the stack being entered, after it the stack left. Nothing without it.
void enteringStack(const void* bottom, size_t bytes) {
#if defined(__SANITIZE_ADDRESS__)
  __sanitizer_start_switch_fiber(nullptr, bottom, bytes);
#else
  (void)bottom, (void)bytes;
#endif
}
void enteredStack(const void** leftBottom, size_t* leftBytes) {
#if defined(__SANITIZE_ADDRESS__)
  __sanitizer_finish_switch_fiber(nullptr, leftBottom, leftBytes);
#else
  (void)leftBottom, (void)leftBytes;
#endif
}
// A thread entered from the scheduler.
void enteredThread() { enteredStack(&schedulerStackBottom, &schedulerStackBytes); }

void backToScheduler() {
  enteringStack(schedulerStackBottom, schedulerStackBytes);
  _longjmp(runtime().scheduler, 1);
}

void waitAt(Wait wait) {
  Thread& t = currentThread();
  t.wait = wait;
  if (_setjmp(t.resume) == 0) backToScheduler();
  enteredThread();
}

[[noreturn]] void threadMain() {
  enteredThread();
  Runtime& r = runtime();
  (*r.body)();
  r.threads[size_t(r.current)].wait = Wait::Done;
  backToScheduler();
  __builtin_unreachable();
}

unsigned char* stackOf(Runtime& r, int thread) {
  while (r.stacks.size() <= size_t(thread)) {
    void* memory = mmap(nullptr, kStackBytes + kPageBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (memory == MAP_FAILED) {
      std::fprintf(stderr, "cuda_emulation: cannot map a thread's stack\n");
      std::abort();
    }
    mprotect(memory, kPageBytes, PROT_NONE);  // an overflowing thread faults instead of corrupting
    r.stacks.push_back(static_cast<unsigned char*>(memory) + kPageBytes);
  }
  return r.stacks[size_t(thread)];
}

// The threads of warp w once its last running lane waits: all waiting at the warp collective ->
// all run on. Lanes that exited cannot take part in a full-mask collective.
void releaseWarp(Runtime& r, int w) {
  const int first = w * 32, last = std::min(first + 32, r.threadCount);
  int waiting = 0, done = 0;
  for (int t = first; t < last; ++t) {
    const Wait wait = r.threads[size_t(t)].wait;
    if (wait == Wait::None || wait == Wait::Block) return;
    waiting += wait == Wait::Warp, done += wait == Wait::Done;
  }
  if (waiting == 0) return;
  if (done > 0) fault("a warp collective (__syncwarp, __shfl_xor_sync) with lanes that have exited");
  for (int t = first; t < last; ++t)
    if (r.threads[size_t(t)].wait == Wait::Warp) r.threads[size_t(t)].wait = Wait::None;
}

// Runs thread t until it waits or ends. Its own frame, so that the scheduler's locals are never
// live across the _setjmp.
void resume(Runtime& r, int t) {
  Thread& thread = r.threads[size_t(t)];
  r.current = t;
  threadIdx = {unsigned(t), 0, 0};
  if (_setjmp(r.scheduler) == 0) {
    enteringStack(stackOf(r, t), kStackBytes);
    if (!thread.started) {
      thread.started = true;
      setcontext(&thread.start);
    }
    _longjmp(thread.resume, 1);
  }
  enteredStack(nullptr, nullptr);
}

// The warpgroup instructions are collective (.sync.aligned): the 128 threads of a warpgroup (warps
// 4w .. 4w + 3) all issue each of them, with the same descriptors. A warp that skips a product, or
// one that gives other descriptors, leaves the GPU's result undefined.
void checkWarpgroups(const Runtime& r) {
  for (int first = 0; first < r.threadCount; first += 128) {
    const int last = std::min(first + 128, r.threadCount);
    for (int t = first; t < last; ++t) {
      const Thread& thread = r.threads[size_t(t)];
      if (thread.warpgroupInstructions == 0) continue;
      if (last - first < 128) return fault("warpgroup instructions in a block that is not whole warpgroups of 4 warps");
      const Thread& leader = r.threads[size_t(first)];
      if (thread.warpgroupTrace != leader.warpgroupTrace ||
          thread.warpgroupInstructions != leader.warpgroupInstructions)
        return fault(
            "the threads of a warpgroup issued different warpgroup instructions (wgmma.fence, "
            "wgmma.mma_async and its descriptors, commit_group, wait_group): thread " +
            std::to_string(t) + " issued " + std::to_string(thread.warpgroupInstructions) + ", thread " +
            std::to_string(first) + " " + std::to_string(leader.warpgroupInstructions));
    }
  }
}

// Runs the block's threads to their end; false on a deadlock.
bool runBlock(Runtime& r) {
  for (int t = 0; t < r.threadCount; ++t) {
    Thread& thread = r.threads[size_t(t)];
    getcontext(&thread.start);
    thread.start.uc_stack.ss_sp = stackOf(r, t);
    thread.start.uc_stack.ss_size = kStackBytes;
    thread.start.uc_link = nullptr;  // threadMain never returns
    makecontext(&thread.start, threadMain, 0);
    thread.started = false;
    thread.wait = Wait::None;
    thread.exchangeParity = 0;
    thread.openBatch.clear();
    thread.batches.clear();  // copies never waited for are dropped with their block
    thread.warpgroupFenced = false;
    thread.openProducts.clear();
    thread.productGroups.clear();
    thread.warpgroupTrace = kTraceSeed;
    thread.warpgroupInstructions = 0;
    thread.proxyFenced = false;
  }
  if (r.shared != nullptr) r.asyncView.assign(r.shared, r.shared + r.launchSharedBytes);
  const bool ascending = r.schedule == Schedule::Ascending;
  for (;;) {
    int next = -1;
    for (int k = 0; k < r.threadCount && next < 0; ++k) {
      const int t = ascending ? k : r.threadCount - 1 - k;
      if (r.threads[size_t(t)].wait == Wait::None) next = t;
    }
    if (next >= 0) {
      resume(r, next);
      releaseWarp(r, next / 32);
      continue;
    }
    bool allDone = true, allAtBarrier = true;
    for (const Thread& t : r.threads) {
      allDone = allDone && t.wait == Wait::Done;
      allAtBarrier = allAtBarrier && (t.wait == Wait::Block || t.wait == Wait::Done);
    }
    if (allDone) {
      for (const Thread& t : r.threads)
        if (!t.openProducts.empty() || !t.productGroups.empty())
          fault("a thread ended with wgmma products it never waited for (wgmma.commit_group, wgmma.wait_group)");
      checkWarpgroups(r);
      return true;
    }
    if (!allAtBarrier) {
      fault("deadlock: the threads of a block wait at different barriers (__syncthreads, __syncwarp, shuffles)");
      return false;
    }
    for (Thread& t : r.threads)  // threads that exited count as arrived, as on sm_70 and later
      if (t.wait == Wait::Block) t.wait = Wait::None;
  }
}

// Puts this lane's `bytes` into its slot of its warp's exchange row, waits for the whole warp, and
// returns the row: slot l holds lane l's bytes.
const std::array<std::array<unsigned char, kSlotBytes>, 32>& exchangeWithWarp(const void* mine, size_t bytes) {
  Runtime& r = runtime();
  const int t = r.current, warp = t / 32, lane = t % 32;
  Thread& self = currentThread();
  const unsigned parity = self.exchangeParity;
  self.exchangeParity = parity ^ 1u;
  auto& row = r.exchange[size_t(warp)][parity];
  std::memcpy(row[size_t(lane)].data(), mine, bytes);
  waitAt(Wait::Warp);
  return row;
}

template <typename T>
T shuffleXor(unsigned mask, T value, int laneMask, int width) {
  static_assert(sizeof(T) <= kSlotBytes, "a shuffle slot holds kSlotBytes");
  if (mask != 0xffffffffu || width != 32) fault("cuda_emulation runs full-warp shuffles only");
  const auto& row = exchangeWithWarp(&value, sizeof value);
  T out;
  std::memcpy(&out, row[size_t((lane() ^ laneMask) & 31)].data(), sizeof out);
  return out;
}

int anyLane(unsigned mask, int predicate) {
  if (mask != 0xffffffffu) fault("cuda_emulation runs full-warp votes only");
  const auto& row = exchangeWithWarp(&predicate, sizeof predicate);
  int any = 0;
  for (const auto& slot : row) {
    int lanePredicate;
    std::memcpy(&lanePredicate, slot.data(), sizeof lanePredicate);
    any |= lanePredicate != 0;
  }
  return any;
}

// Whether [pointer, pointer + bytes) lies in the running launch's dynamic shared memory.
bool inLaunchShared(const void* pointer, size_t bytes) {
  const Runtime& r = runtime();
  const auto address = reinterpret_cast<uintptr_t>(pointer), shared = reinterpret_cast<uintptr_t>(r.shared);
  return r.shared != nullptr && address >= shared && address + bytes <= shared + r.launchSharedBytes;
}

float bf16Bits(uint32_t bits) { return __bfloat162float(__nv_bfloat16{uint16_t(bits)}); }
uint32_t bitsOf(const __nv_bfloat16* element) { return element->bits; }

// Lane l's share of a warp's (16, 16) A operand, as warp_mma.cuh lays out mma.sync's A fragment
// (the warpgroup MMA's register A of a warp's 16 rows too), into A.
void unpackFragmentA(const uint32_t (&regs)[4], int l, float (&A)[16][16]) {
  const int g = l / 4, t = l % 4;
  for (int half = 0; half < 2; ++half) {
    const int shift = 16 * half;  // the lower element in the lower 16 bits
    A[g][2 * t + half] = bf16Bits(regs[0] >> shift);
    A[g + 8][2 * t + half] = bf16Bits(regs[1] >> shift);
    A[g][2 * t + 8 + half] = bf16Bits(regs[2] >> shift);
    A[g + 8][2 * t + 8 + half] = bf16Bits(regs[3] >> shift);
  }
}

// One shared operand of a warpgroup product, from its descriptor (PTX ISA, "Matrix Descriptor
// Format"): start address, leading and stride byte offsets, no swizzling.
struct SharedOperand {
  uint32_t start = 0, leading = 0, stride = 0;
  bool valid = false;
};

SharedOperand decodeDescriptor(uint64_t descriptor) {
  SharedOperand o;
  if ((descriptor >> 62) != 0) {
    fault("a wgmma descriptor asks for a swizzled layout, which the emulation does not read");
    return o;
  }
  if (((descriptor >> 49) & 7u) != 0) {
    fault("a wgmma descriptor has a base offset, which only swizzled layouts use");
    return o;
  }
  o.start = uint32_t(descriptor & 0x3FFFu) << 4;
  o.leading = uint32_t((descriptor >> 16) & 0x3FFFu) << 4;
  o.stride = uint32_t((descriptor >> 32) & 0x3FFFu) << 4;
  o.valid = true;
  return o;
}

// Element (mn, k) of a K-major operand (rows along M or N, 8 elements of K each) or element (k, mn) of
// an MN-major one (rows along K, 8 elements of N each), without swizzling: core matrices of 8 rows
// of 16 bytes; between core matrices along K the leading byte offset, along M or N the stride byte
// offset.
float sharedElement(const SharedOperand& o, int mn, int k, bool mnMajor) {
  const uint32_t byte = mnMajor ? o.start + uint32_t(mn / 8) * o.stride + uint32_t(mn % 8) * 2 +
                                      uint32_t(k / 8) * o.leading + uint32_t(k % 8) * 16
                                : o.start + uint32_t(mn / 8) * o.stride + uint32_t(mn % 8) * 16 +
                                      uint32_t(k / 8) * o.leading + uint32_t(k % 8) * 2;
  const Runtime& r = runtime();
  if (size_t(byte) + 2 > r.launchSharedBytes) {
    fault("a wgmma operand reaches past the launch's dynamic shared memory");
    return 0.f;
  }
  if (std::memcmp(r.shared + byte, r.asyncView.data() + byte, 2) != 0)
    fault("a wgmma reads shared memory written since the last fence.proxy.async of every thread of its block");
  __nv_bfloat16 e;
  std::memcpy(&e, r.shared + byte, sizeof e);
  return __bfloat162float(e);
}

// This lane's 32 accumulators of product p: rows g, g + 8 of its warp's 16 (rows 16 warp + g, ... of
// the 64), columns 8j + 2t, 8j + 2t + 1, each summed over k in order, as mma.sync's emulation sums.
void computeProduct(const WarpgroupProduct& p) {
  const int lane = runtime().current % 32, warp = runtime().current % 128 / 32, g = lane / 4, t = lane % 4;
  const SharedOperand a = p.aInRegisters() ? SharedOperand{} : decodeDescriptor(p.aDescriptor),
                      b = decodeDescriptor(p.bDescriptor);
  if ((!p.aInRegisters() && !a.valid) || !b.valid) return;
  for (int j = 0; j < 8; ++j)
    for (int e = 0; e < 4; ++e) {
      const int i = g + 8 * (e / 2), n = 8 * j + 2 * t + e % 2;
      float sum = p.accumulate ? p.d[4 * j + e] : 0.f;
      for (int k = 0; k < 16; ++k) {
        const float x = p.aInRegisters() ? p.a[i][k] : sharedElement(a, 16 * warp + i, k, p.aMnMajor);
        sum += x * sharedElement(b, n, k, p.bMnMajor);
      }
      p.d[4 * j + e] = sum;
    }
}

cudaError_t fail(cudaError_t error, const std::string& why) {
  Runtime& r = runtime();
  r.fault = why;
  r.lastError = error;
  return error;
}

}  // namespace

void setSchedule(Schedule schedule) { runtime().schedule = schedule; }

const std::string& lastFault() { return runtime().fault; }

bool useSharedMemory(unsigned char* base, size_t bytes) {
  runtime().shared = base;
  runtime().sharedBytes = bytes;
  return true;
}

unsigned char* sharedMemory() { return runtime().shared; }

void fault(const std::string& message) {
  std::string& first = runtime().fault;
  if (first.empty()) first = message;
}

int lane() { return runtime().current % 32; }

void multiplyAddM16N8K16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  struct Operands {
    uint32_t a[4], b[2];
  };
  const Operands mine = {{a[0], a[1], a[2], a[3]}, {b0, b1}};
  const auto& row = exchangeWithWarp(&mine, sizeof mine);
  // The whole A (16 x 16) and B (16 x 8) from every lane's registers, as warp_mma.cuh lays them out.
  float A[16][16], B[16][8];
  for (int l = 0; l < 32; ++l) {
    Operands o;
    std::memcpy(&o, row[size_t(l)].data(), sizeof o);
    unpackFragmentA(o.a, l, A);
    const int g = l / 4, t = l % 4;
    for (int half = 0; half < 2; ++half) {
      const int shift = 16 * half;
      B[2 * t + half][g] = bf16Bits(o.b[0] >> shift);
      B[2 * t + 8 + half][g] = bf16Bits(o.b[1] >> shift);
    }
  }
  const int g = lane() / 4, t = lane() % 4;
  for (int e = 0; e < 4; ++e) {
    const int i = g + 8 * (e / 2), j = 2 * t + e % 2;
    float sum = d[e];
    for (int k = 0; k < 16; ++k) sum += A[i][k] * B[k][j];
    d[e] = sum;
  }
}

void loadMatrices(uint32_t (&r)[4], const __nv_bfloat16* rowAddress, bool transposed) {
  if (reinterpret_cast<uintptr_t>(rowAddress) % 16 != 0) fault("an ldmatrix row address is not 16-byte aligned");
  if (!inLaunchShared(rowAddress, 16)) fault("an ldmatrix row address is not in the launch's dynamic shared memory");
  const auto& row = exchangeWithWarp(&rowAddress, sizeof rowAddress);
  if (!runtime().fault.empty()) {  // a bad address of any lane: read nothing
    r[0] = r[1] = r[2] = r[3] = 0;
    __syncwarp();
    return;
  }
  // Element (y, x) of matrix m: lane 8m + y gave the address of its row y.
  auto element = [&](int m, int y, int x) {
    const __nv_bfloat16* p;
    std::memcpy(&p, row[size_t(8 * m + y)].data(), sizeof p);
    return bitsOf(p + x);
  };
  const int g = lane() / 4, t = lane() % 4;
  for (int m = 0; m < 4; ++m)
    r[m] = transposed ? element(m, 2 * t, g) | (element(m, 2 * t + 1, g) << 16)
                      : element(m, g, 2 * t) | (element(m, g, 2 * t + 1) << 16);
  // The warp reads at once on the GPU: no lane of it goes on (and writes) before all have read.
  __syncwarp();
}

uint32_t sharedAddress(const void* pointer) {
  if (!inLaunchShared(pointer, 1)) fault("a shared-memory address outside the launch's dynamic shared memory");
  return uint32_t(reinterpret_cast<uintptr_t>(pointer) - reinterpret_cast<uintptr_t>(runtime().shared));
}

// Adds a warpgroup instruction to this thread's trace: its kind and operands.
void trace(std::initializer_list<uint64_t> instruction) {
  Thread& self = currentThread();
  for (uint64_t value : instruction) self.warpgroupTrace = traced(self.warpgroupTrace, value);
  ++self.warpgroupInstructions;
}

enum WarpgroupInstruction : uint64_t { kFence = 1, kMultiplyAdd, kCommit, kWait };

void warpgroupArrive() {
  trace({kFence});
  currentThread().warpgroupFenced = true;
}

void warpgroupMultiplyAdd(float (&d)[8][4], const uint32_t* a, uint64_t aDescriptor, uint64_t bDescriptor,
                          bool aMnMajor, bool bMnMajor, bool accumulate) {
  trace({kMultiplyAdd, uint64_t(a != nullptr), aDescriptor, bDescriptor, uint64_t(aMnMajor), uint64_t(bMnMajor),
         uint64_t(accumulate)});
  Thread& self = currentThread();
  if (!self.warpgroupFenced) fault("a wgmma.mma_async without wgmma.fence since the last wgmma.wait_group");
  WarpgroupProduct p{&d[0][0], a, {}, aDescriptor, bDescriptor, aMnMajor, bMnMajor, accumulate};
  if (a != nullptr) {  // the warp's A from every lane's registers, as mma.sync's A fragment
    std::copy(a, a + 4, p.aIssued);
    const auto& row = exchangeWithWarp(p.aIssued, sizeof p.aIssued);
    for (int l = 0; l < 32; ++l) {
      uint32_t o[4];
      std::memcpy(o, row[size_t(l)].data(), sizeof o);
      unpackFragmentA(o, l, p.a);
    }
  }
  // Computed at either end of its time in flight: at the issue (descending), at the wait (ascending).
  // A product that overwrites d leaves NaN there until then, where the kernel's own values could
  // hide a read before the wait.
  if (runtime().schedule == Schedule::Descending) {
    computeProduct(p);
    p.computed = true;
  } else if (!accumulate) {
    std::fill(&d[0][0], &d[0][0] + 32, NAN);
  }
  self.openProducts.push_back(p);
}

void warpgroupCommit() {
  trace({kCommit});
  Thread& self = currentThread();
  self.productGroups.push_back(std::move(self.openProducts));
  self.openProducts.clear();
}

void warpgroupWait(int pending) {
  trace({kWait, uint64_t(pending)});
  Thread& self = currentThread();
  if (!self.openProducts.empty()) fault("wgmma.wait_group with products issued after the last wgmma.commit_group");
  for (; self.productGroups.size() > size_t(pending); self.productGroups.pop_front())
    for (const WarpgroupProduct& p : self.productGroups.front()) {
      // The GPU reads an A in registers while the product is in flight, not only at its issue.
      if (p.aInRegisters() && !std::equal(p.aIssued, p.aIssued + 4, p.aRegisters))
        fault("a wgmma's A registers changed before the wgmma.wait_group that completes it");
      if (!p.computed) computeProduct(p);
    }
  self.warpgroupFenced = false;
}

void fenceProxyAsync() {
  Runtime& r = runtime();
  currentThread().proxyFenced = true;
  // Exited threads write nothing more: they count as fenced.
  if (!std::all_of(r.threads.begin(), r.threads.end(),
                   [](const Thread& t) { return t.proxyFenced || t.wait == Wait::Done; }))
    return;
  std::copy(r.shared, r.shared + r.launchSharedBytes, r.asyncView.begin());
  for (Thread& t : r.threads) t.proxyFenced = false;
}

cudaError_t setMaxDynamicShared(const void* kernel, int bytes) {
  if (bytes < 0 || size_t(bytes) > kMaxDynamicSharedBytes) return cudaErrorInvalidValue;
  runtime().maxDynamicShared[kernel] = size_t(bytes);
  return cudaSuccess;
}

cudaError_t launch(const void* kernel, const cudaLaunchConfig_t& config, const std::function<void()>& body) {
  Runtime& r = runtime();
  r.fault.clear();
  const dim3 grid = config.gridDim, block = config.blockDim;
  if (block.y != 1 || block.z != 1 || block.x == 0 || block.x > unsigned(kMaxThreads) || block.x % 32 != 0)
    return fail(cudaErrorInvalidConfiguration, "cuda_emulation runs 1-D blocks of whole warps (up to 1024 threads)");
  if (grid.x == 0 || grid.y == 0 || grid.z == 0 || grid.x > 0x7fffffffu || grid.y > 65535 || grid.z > 65535)
    return fail(cudaErrorInvalidConfiguration, "grid dimensions outside CUDA's limits");
  const size_t bytes = config.dynamicSmemBytes;
  const auto allowed = r.maxDynamicShared.find(kernel);
  if (bytes > std::max(kDefaultDynamicSharedBytes, allowed == r.maxDynamicShared.end() ? 0 : allowed->second))
    return fail(cudaErrorInvalidValue,
                "dynamic shared memory above 48 KiB without cudaFuncSetAttribute(MaxDynamicSharedMemorySize)");
  if (bytes > 0 && (r.shared == nullptr || r.sharedBytes < bytes + kSharedGuardBytes))
    return fail(cudaErrorInvalidValue, "the kernel file's shared memory is not registered (useSharedMemory)");

  r.threadCount = int(block.x);
  r.threads.assign(size_t(r.threadCount), Thread{});
  r.exchange.assign(size_t(r.threadCount / 32), {});
  r.launchSharedBytes = bytes;
  r.body = &body;
  gridDim = grid;
  blockDim = block;
  for (unsigned z = 0; z < grid.z; ++z)
    for (unsigned y = 0; y < grid.y; ++y)
      for (unsigned x = 0; x < grid.x; ++x) {
        blockIdx = {x, y, z};
        if (r.shared != nullptr) {
          std::memset(r.shared, kPoison, bytes);
          std::memset(r.shared + bytes, kGuard, kSharedGuardBytes);
        }
        const bool finished = runBlock(r);
        if (r.shared != nullptr && std::any_of(r.shared + bytes, r.shared + bytes + kSharedGuardBytes,
                                               [](unsigned char c) { return c != kGuard; }))
          fault("a thread wrote past the launch's dynamic shared memory");
        if (!finished || !r.fault.empty()) return fail(cudaErrorLaunchFailure, r.fault);
      }
  return cudaSuccess;
}

}  // namespace cuda_emulation

void __syncthreads() { cuda_emulation::waitAt(cuda_emulation::Wait::Block); }

void __syncwarp(unsigned mask) {
  if (mask != 0xffffffffu) cuda_emulation::fault("cuda_emulation runs full-warp __syncwarp only");
  cuda_emulation::waitAt(cuda_emulation::Wait::Warp);
}

float __shfl_xor_sync(unsigned mask, float value, int laneMask, int width) {
  return cuda_emulation::shuffleXor(mask, value, laneMask, width);
}
double __shfl_xor_sync(unsigned mask, double value, int laneMask, int width) {
  return cuda_emulation::shuffleXor(mask, value, laneMask, width);
}
int __any_sync(unsigned mask, int predicate) { return cuda_emulation::anyLane(mask, predicate); }

float4 atomicAdd(float4* address, float4 value) {
  if (reinterpret_cast<uintptr_t>(address) % 16 != 0) {
    cuda_emulation::fault("a float4 atomicAdd's address is not 16-byte aligned");
    return {};
  }
  const float4 old = *address;
  *address = {old.x + value.x, old.y + value.y, old.z + value.z, old.w + value.w};
  return old;
}

void __pipeline_memcpy_async(void* dst, const void* src, size_t sizeAndAlign, size_t zfill) {
  using cuda_emulation::fault;
  auto& r = cuda_emulation::runtime();
  const auto to = reinterpret_cast<uintptr_t>(dst), from = reinterpret_cast<uintptr_t>(src);
  if ((sizeAndAlign != 4 && sizeAndAlign != 8 && sizeAndAlign != 16) || zfill > sizeAndAlign)
    return fault("an asynchronous copy of other than 4, 8 or 16 bytes");
  if (to % sizeAndAlign != 0 || from % sizeAndAlign != 0)
    return fault("an asynchronous copy's pointers are not aligned to its size");
  if (!cuda_emulation::inLaunchShared(dst, sizeAndAlign))
    return fault("an asynchronous copy's destination is not in the launch's dynamic shared memory");
  const cuda_emulation::AsyncCopy copy{static_cast<unsigned char*>(dst), static_cast<const unsigned char*>(src),
                                       sizeAndAlign, zfill};
  // A copy lands at any time between its issue and the wait: at the wait under the ascending
  // schedule (a read before the wait sees old contents), at once under the descending one (a
  // write into a buffer other warps still read, without a barrier between, changes what they read).
  if (r.schedule == cuda_emulation::Schedule::Descending)
    cuda_emulation::land(copy);
  else
    cuda_emulation::currentThread().openBatch.push_back(copy);
}

void __pipeline_commit() {
  auto& thread = cuda_emulation::currentThread();
  thread.batches.push_back(std::move(thread.openBatch));
  thread.openBatch.clear();
}

void __pipeline_wait_prior(size_t prior) {
  auto& batches = cuda_emulation::currentThread().batches;
  for (; batches.size() > prior; batches.pop_front())
    for (const cuda_emulation::AsyncCopy& copy : batches.front()) cuda_emulation::land(copy);
}

cudaError_t cudaGetDevice(int* device) {
  *device = 0;
  return cudaSuccess;
}

cudaError_t cudaGetLastError() {
  auto& r = cuda_emulation::runtime();
  const cudaError_t e = r.lastError;
  r.lastError = cudaSuccess;
  return e;
}

cudaError_t cudaMemsetAsync(void* pointer, int value, size_t bytes, cudaStream_t) {
  std::memset(pointer, value, bytes);
  return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attribute, int device) {
  if (device != 0) return cudaErrorInvalidValue;
  if (attribute == cudaDevAttrComputeCapabilityMajor)
    *value = 9;
  else if (attribute == cudaDevAttrComputeCapabilityMinor)
    *value = 0;
  else if (attribute == cudaDevAttrMaxSharedMemoryPerBlockOptin)
    *value = int(cuda_emulation::kMaxDynamicSharedBytes);
  else
    return cudaErrorInvalidValue;
  return cudaSuccess;
}
