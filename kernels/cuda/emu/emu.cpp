// kernels/cuda/emu/emu.cpp: the emulator's scheduler, memory and runtime API (the design is
// in emu.h). Reads top-down: state, memory, fibers, barriers, the launch, the runtime API.
#include "kernels/cuda/emu/emu.h"

#include <fenv.h>
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/common_interface_defs.h>
#endif
#include <signal.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <sstream>
#include <vector>

namespace cudaemu {

// ---- state --------------------------------------------------------------------------------

enum class Wait { None, Block, Warp, Done };

struct Fiber {
  uint3 idx{};
  unsigned linear = 0, lane = 0, warp = 0;
  ucontext_t ctx{};
  Wait wait = Wait::None;
  const char* what = "";  // the barrier it waits at
  unsigned mask = 0;      // for a warp barrier
  int predicate = 0;
  unsigned char value[8]{};  // what a shuffle deposits
  size_t value_bytes = 0;
  int src = -1;              // which lane's value a shuffle reads (-1: a ballot or syncwarp)
  unsigned char out[8]{};    // what the shuffle returns
  unsigned ballot = 0;
  int block_count = 0;       // __syncthreads_count's answer
};

Fiber* g_current = nullptr;
uint3 g_block_idx{};
dim3 g_block_dim{};
dim3 g_grid_dim{};

namespace {

constexpr size_t kPage = 4096;
constexpr unsigned char kSentinel = 0xA5;
constexpr size_t kFrontPad = 64;        // sentinel bytes checked before every buffer
constexpr uint32_t kSignallingNaN = 0x7FA00000u;  // exponent all ones, quiet bit clear

struct Launch {
  const char* name = "";
  dim3 grid, block;
  KernelBody body = nullptr;
  void* closure = nullptr;
  std::vector<Fiber> fibers;
  ucontext_t sched{};
  bool failed = false;
  std::string error;
};
Launch* g_launch = nullptr;
cudaError_t g_last_error = cudaSuccess;

std::string dim_str(uint3 d) {
  std::ostringstream os;
  os << '(' << d.x << ',' << d.y << ',' << d.z << ')';
  return os.str();
}
std::string dim_str(dim3 d) { return dim_str(uint3{d.x, d.y, d.z}); }

std::string where_block() {
  std::string s = "kernel '" + std::string(g_launch->name) + "' (grid " + dim_str(g_launch->grid) + ", block " +
                  dim_str(g_launch->block) + "), block " + dim_str(g_block_idx);
  return s;
}
std::string where(const Fiber& f) { return where_block() + " thread " + dim_str(f.idx); }

size_t env_size(const char* name, size_t fallback) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  return static_cast<size_t>(std::strtoull(v, nullptr, 10));
}

size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

// ---- memory: cudaMalloc'd buffers end at an inaccessible page ------------------------------

struct Allocation {
  char* map = nullptr;
  size_t map_bytes = 0;
  char* data = nullptr;
  size_t bytes = 0;   // what was asked for
  char* guard = nullptr;  // the inaccessible page right after data + round_up(bytes, 16)
};
// Never destroyed: a Device (or any static kernels::Array in it) may free its memory while the program
// exits, after a static map here would already be gone.
std::map<uintptr_t, Allocation>& allocations() {
  static auto* a = new std::map<uintptr_t, Allocation>;
  return *a;
}
size_t g_bytes_allocated = 0;

// The allocation whose data (or, with slack, its guard page and pads) contains p.
const Allocation* find_allocation(const void* p, bool include_pads) {
  const auto addr = reinterpret_cast<uintptr_t>(p);
  auto& all = allocations();
  auto it = all.upper_bound(addr + (include_pads ? kFrontPad : 0));
  if (it == all.begin()) return nullptr;
  --it;
  const Allocation& a = it->second;
  const auto lo = reinterpret_cast<uintptr_t>(include_pads ? a.map : a.data);
  const auto hi = reinterpret_cast<uintptr_t>(include_pads ? a.guard + kPage : a.data + a.bytes);
  return (addr >= lo && addr < hi) ? &a : nullptr;
}

// A region of `bytes` (16-byte aligned start) followed by an inaccessible page.
Allocation map_guarded(size_t bytes) {
  Allocation a;
  a.bytes = bytes;
  const size_t body = round_up(std::max<size_t>(bytes, 1), 16);
  a.map_bytes = round_up(body + kFrontPad, kPage) + kPage;
  void* m = mmap(nullptr, a.map_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) return Allocation{};
  a.map = static_cast<char*>(m);
  a.guard = a.map + a.map_bytes - kPage;
  mprotect(a.guard, kPage, PROT_NONE);
  a.data = a.guard - body;
  std::memset(a.map, kSentinel, static_cast<size_t>(a.data - a.map));
  std::memset(a.data + bytes, kSentinel, body - bytes);
  return a;
}

// "" when the pads around every buffer are intact, else what was overwritten.
std::string check_pads() {
  for (const auto& [key, a] : allocations()) {
    const char* front = a.data - kFrontPad;
    for (size_t i = 0; i < kFrontPad; ++i) {
      if (static_cast<unsigned char>(front[i]) != kSentinel) {
        return "wrote " + std::to_string(kFrontPad - i) + " bytes before the start of a " +
               std::to_string(a.bytes) + "-byte device buffer";
      }
    }
    const size_t body = round_up(std::max<size_t>(a.bytes, 1), 16);
    for (size_t i = a.bytes; i < body; ++i) {
      if (static_cast<unsigned char>(a.data[i]) != kSentinel) {
        return "wrote past the end of a " + std::to_string(a.bytes) + "-byte device buffer (at byte " +
               std::to_string(i) + ")";
      }
    }
  }
  return "";
}

// Dynamic shared memory of the current launch, and the fiber stacks (reused).
Allocation g_smem;
struct Stack {
  char* map = nullptr;
  size_t bytes = 0;  // usable, above the guard page
};
std::vector<Stack>& stacks() {
  static std::vector<Stack> s;
  return s;
}
size_t stack_bytes() {
  static const size_t kb = env_size("NNLAB_EMU_STACK_KB", 256);
  return round_up(std::max<size_t>(kb, 64) * 1024, kPage);
}
const Stack& stack_for(size_t i) {
  auto& all = stacks();
  while (all.size() <= i) {
    Stack s;
    s.bytes = stack_bytes();
    void* m = mmap(nullptr, s.bytes + kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
    if (m == MAP_FAILED) throw LaunchError("emulator: cannot map a fiber stack");
    s.map = static_cast<char*>(m);
    mprotect(s.map, kPage, PROT_NONE);  // the stack grows down into this page
    all.push_back(s);
  }
  return all[i];
}

// AddressSanitizer must be told when the stack changes under it (the sanitize preset);
// elsewhere these are empty.
#if defined(__SANITIZE_ADDRESS__)
const void* g_sched_stack_bottom = nullptr;
size_t g_sched_stack_size = 0;
void* g_sched_fake_stack = nullptr;
void asan_enter_fiber(const Stack& s) { __sanitizer_start_switch_fiber(&g_sched_fake_stack, s.map + kPage, s.bytes); }
void asan_back_in_scheduler() { __sanitizer_finish_switch_fiber(g_sched_fake_stack, nullptr, nullptr); }
void asan_fiber_started() { __sanitizer_finish_switch_fiber(nullptr, &g_sched_stack_bottom, &g_sched_stack_size); }
void asan_leave_fiber(bool finished) {
  static void* fake = nullptr;
  __sanitizer_start_switch_fiber(finished ? nullptr : &fake, g_sched_stack_bottom, g_sched_stack_size);
}
void asan_fiber_resumed() { __sanitizer_finish_switch_fiber(nullptr, nullptr, nullptr); }
#else
void asan_enter_fiber(const Stack&) {}
void asan_back_in_scheduler() {}
void asan_fiber_started() {}
void asan_leave_fiber(bool) {}
void asan_fiber_resumed() {}
#endif

// ---- faults inside a kernel: turned into a LaunchError naming the thread -----------------

struct sigaction g_old_segv, g_old_bus, g_old_fpe;
char g_altstack[64 * 1024];

std::string describe_address(const void* addr, bool write) {
  const char* verb = write ? "wrote" : "read";
  const auto p = reinterpret_cast<uintptr_t>(addr);
  if (const Allocation* a = find_allocation(addr, true)) {
    const auto off = static_cast<long long>(p - reinterpret_cast<uintptr_t>(a->data));
    std::string s = std::string(verb) + " past the end of a " + std::to_string(a->bytes) +
                    "-byte device buffer (byte offset " + std::to_string(off) + ", element " +
                    std::to_string(off / 4) + " of " + std::to_string(a->bytes / 4) + " floats)";
    return s;
  }
  if (g_smem.map && p >= reinterpret_cast<uintptr_t>(g_smem.guard) &&
      p < reinterpret_cast<uintptr_t>(g_smem.guard) + kPage) {
    return std::string(verb) + " past the end of the " + std::to_string(g_smem.bytes) +
           " bytes of dynamic shared memory the launch asked for";
  }
  for (const Stack& s : stacks()) {
    if (p >= reinterpret_cast<uintptr_t>(s.map) && p < reinterpret_cast<uintptr_t>(s.map) + kPage) {
      return "overflowed its stack (" + std::to_string(s.bytes / 1024) +
             " KiB; a large local array? NNLAB_EMU_STACK_KB raises it)";
    }
  }
  std::ostringstream os;
  os << verb << " an invalid address " << addr << (p < kPage ? " (a null pointer)" : "");
  return os.str();
}

void on_fault(int sig, siginfo_t* info, void* uctx) {
  if (!g_launch || !g_current) {  // not ours: let the default action happen
    signal(sig, SIG_DFL);
    return;
  }
  std::string what;
  if (sig == SIGFPE) {
    if (info->si_code == FPE_FLTINV) {
      what = "made an invalid floating-point operation: arithmetic on uninitialised dynamic shared memory "
             "(the emulator fills it with signalling NaNs before every block), or inf - inf, 0 * inf, "
             "sqrt of a negative number";
    } else if (info->si_code == FPE_INTDIV) {
      what = "divided an integer by zero";
    } else {
      what = "raised a floating-point exception";
    }
  } else {
    bool write = false;
#if defined(__x86_64__)
    write = (static_cast<ucontext_t*>(uctx)->uc_mcontext.gregs[REG_ERR] & 2) != 0;
#else
    (void)uctx;
#endif
    // A general-protection fault (SI_KERNEL) reports no address: on x86 that is almost
    // always an aligned SSE/AVX load or store (float4) at an address not 16-byte aligned.
    what = info->si_code == SI_KERNEL
               ? std::string("made a misaligned vector access (a float4 load or store needs a 16-byte aligned "
                             "address: is the pointer offset by a number of floats that is not a multiple of 4?) "
                             "or touched a non-canonical address")
               : describe_address(info->si_addr, write);
  }
  g_launch->failed = true;
  g_launch->error = where(*g_current) + ": " + what;
  g_current->wait = Wait::Done;
  asan_leave_fiber(true);        // this fiber is abandoned
  setcontext(&g_launch->sched);  // back to the scheduler, which throws
}

bool fp_trap_enabled() {
  static const bool on = env_size("NNLAB_EMU_FPTRAP", 1) != 0;
  return on;
}

void install_handlers() {
  static bool altstack_set = false;
  if (!altstack_set) {
    stack_t ss{};
    ss.ss_sp = g_altstack;
    ss.ss_size = sizeof g_altstack;
    sigaltstack(&ss, nullptr);
    altstack_set = true;
  }
  struct sigaction sa {};
  sa.sa_sigaction = on_fault;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_NODEFER;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGSEGV, &sa, &g_old_segv);
  sigaction(SIGBUS, &sa, &g_old_bus);
  sigaction(SIGFPE, &sa, &g_old_fpe);
}

void restore_handlers() {
  sigaction(SIGSEGV, &g_old_segv, nullptr);
  sigaction(SIGBUS, &g_old_bus, nullptr);
  sigaction(SIGFPE, &g_old_fpe, nullptr);
}

// ---- fibers -------------------------------------------------------------------------------

struct BreakAt {
  bool on = false;
  uint3 block{}, thread{};
};
BreakAt parse_break() {
  BreakAt b;
  const char* v = std::getenv("NNLAB_EMU_BREAK");
  if (!v || !*v) return b;
  unsigned bx = 0, by = 0, bz = 0, tx = 0, ty = 0, tz = 0;
  if (std::sscanf(v, "block=%u,%u,%u thread=%u,%u,%u", &bx, &by, &bz, &tx, &ty, &tz) == 6) {
    b.on = true;
    b.block = {bx, by, bz};
    b.thread = {tx, ty, tz};
  } else {
    std::fprintf(stderr, "NNLAB_EMU_BREAK='%s' not understood (want \"block=1,0,0 thread=5,0,0\")\n", v);
  }
  return b;
}

bool same(uint3 a, uint3 b) { return a.x == b.x && a.y == b.y && a.z == b.z; }

void yield() {
  asan_leave_fiber(g_current->wait == Wait::Done);
  swapcontext(&g_current->ctx, &g_launch->sched);
  asan_fiber_resumed();
}

// The fiber is abandoned, so nothing on its stack is ever destroyed: the caller's message
// is released here (swap with an empty string) before leaving for good.
void fail_here(std::string&& what) {
  g_launch->failed = true;
  g_launch->error = where(*g_current) + ": " + what;
  std::string().swap(what);
  g_current->wait = Wait::Done;
  yield();  // never resumed
}

}  // namespace

}  // namespace cudaemu

// A function to break on in gdb: every emulated thread calls it as it starts, with its
// coordinates as arguments, so `break cudaemu_thread_start if block_x == 1 && thread_x == 5`
// stops exactly there; `finish`, then `step`, enters the kernel in that thread.
extern "C" __attribute__((noinline)) void cudaemu_thread_start(const char* kernel, unsigned block_x,
                                                               unsigned block_y, unsigned block_z,
                                                               unsigned thread_x, unsigned thread_y,
                                                               unsigned thread_z) {
  asm volatile("" ::"r"(kernel), "r"(block_x), "r"(block_y), "r"(block_z), "r"(thread_x), "r"(thread_y),
               "r"(thread_z)
               : "memory");
}

namespace cudaemu {
namespace {

void fiber_main() {
  asan_fiber_started();
  Fiber* f = g_current;
  cudaemu_thread_start(g_launch->name, g_block_idx.x, g_block_idx.y, g_block_idx.z, f->idx.x, f->idx.y, f->idx.z);
  static const BreakAt brk = parse_break();
  if (brk.on && same(brk.block, g_block_idx) && same(brk.thread, f->idx)) raise(SIGTRAP);
  std::string thrown;  // the failure is reported after the catch: the exception is freed first
  try {
    g_launch->body(g_launch->closure);
  } catch (const std::exception& e) {
    thrown = std::string("threw ") + e.what();
  }
  if (!thrown.empty()) fail_here(std::move(thrown));
  f->wait = Wait::Done;
  yield();  // never resumed: the scheduler drops finished fibers
}

// ---- barriers: release what can be released -------------------------------------------------

// Warp barriers: a waiting lane is released when every lane of its mask waits at a warp
// barrier too. Returns whether any was released; sets the launch's error on misuse.
bool release_warps() {
  auto& fibers = g_launch->fibers;
  const size_t n = fibers.size();
  std::vector<size_t> ready;
  for (size_t i = 0; i < n; ++i) {
    Fiber& f = fibers[i];
    if (f.wait != Wait::Warp) continue;
    const size_t base = static_cast<size_t>(f.warp) * 32;
    bool all_here = true;
    for (unsigned l = 0; l < 32; ++l) {
      if (!(f.mask >> l & 1u)) continue;
      const size_t j = base + l;
      if (j >= n) {
        g_current = &f;
        g_launch->failed = true;
        g_launch->error = where(f) + ": " + f.what + " with mask 0x" + [&] {
          std::ostringstream os;
          os << std::hex << f.mask;
          return os.str();
        }() + " names lane " + std::to_string(l) + " of warp " + std::to_string(f.warp) + ", but the block has only " +
                          std::to_string(n) + " threads (the mask must name only lanes that exist)";
        return false;
      }
      if (fibers[j].wait == Wait::Done) {
        g_launch->failed = true;
        g_launch->error = where(f) + ": " + f.what + " waits for lane " + std::to_string(l) + " (thread " +
                          dim_str(fibers[j].idx) +
                          "), which has already returned: every lane named in the mask must call it";
        return false;
      }
      if (fibers[j].wait != Wait::Warp) all_here = false;
    }
    if (all_here) ready.push_back(i);
  }
  // Compute every released lane's answer before any of them runs again.
  for (size_t i : ready) {
    Fiber& f = fibers[i];
    const size_t base = static_cast<size_t>(f.warp) * 32;
    if (f.src >= 0) {
      if (f.src >= 32 || !(f.mask >> f.src & 1u)) {
        g_launch->failed = true;
        g_launch->error = where(f) + ": " + f.what + " reads lane " + std::to_string(f.src) +
                          ", which is not in the mask: its value is undefined";
        return false;
      }
      std::memcpy(f.out, fibers[base + static_cast<size_t>(f.src)].value, f.value_bytes);
    }
    f.ballot = 0;
    for (unsigned l = 0; l < 32; ++l) {
      if ((f.mask >> l & 1u) && fibers[base + l].predicate) f.ballot |= 1u << l;
    }
  }
  for (size_t i : ready) fibers[i].wait = Wait::None;
  return !ready.empty();
}

// The block barrier: released when every thread waits at it. A thread that returned
// before it never will: that is the error.
bool release_block() {
  auto& fibers = g_launch->fibers;
  const Fiber* waiting = nullptr;
  const Fiber* done = nullptr;
  int count = 0;
  for (const Fiber& f : fibers) {
    if (f.wait == Wait::Block) {
      if (!waiting) waiting = &f;
      count += f.predicate != 0;
    } else if (f.wait == Wait::Done) {
      if (!done) done = &f;
    } else {
      return false;  // someone still runs or waits at a warp barrier
    }
  }
  if (!waiting) return false;
  if (done) {
    g_launch->failed = true;
    g_launch->error = where(*waiting) + ": __syncthreads() is waited at here, but thread " + dim_str(done->idx) +
                      " has already returned and will never reach it: every thread of a block must reach "
                      "every __syncthreads (is there a `return` before it, or an `if` around it?)";
    return false;
  }
  for (Fiber& f : g_launch->fibers) {
    f.wait = Wait::None;
    f.block_count = count;
  }
  return true;
}

std::string describe_deadlock() {
  const Fiber* at_block = nullptr;
  const Fiber* at_warp = nullptr;
  for (const Fiber& f : g_launch->fibers) {
    if (f.wait == Wait::Block && !at_block) at_block = &f;
    if (f.wait == Wait::Warp && !at_warp) at_warp = &f;
  }
  std::string s = where_block() + ": deadlock: ";
  if (at_block && at_warp) {
    s += "thread " + dim_str(at_block->idx) + " waits at __syncthreads while thread " + dim_str(at_warp->idx) +
         " waits at " + at_warp->what + ": threads that must meet wait at different barriers";
  } else if (at_warp) {
    s += "thread " + dim_str(at_warp->idx) + " waits at " + at_warp->what +
         " for lanes that wait at a different warp barrier";
  } else {
    s += "no thread can go on";
  }
  return s;
}

void run_block() {
  auto& fibers = g_launch->fibers;
  const size_t n = fibers.size();
  for (size_t i = 0; i < n; ++i) {
    Fiber& f = fibers[i];
    f.wait = Wait::None;
    const Stack& s = stack_for(i);
    getcontext(&f.ctx);
    f.ctx.uc_stack.ss_sp = s.map + kPage;
    f.ctx.uc_stack.ss_size = s.bytes;
    f.ctx.uc_link = nullptr;
    makecontext(&f.ctx, fiber_main, 0);
  }
  if (g_smem.map) {  // signalling NaNs: arithmetic on a value no thread wrote traps
    auto* w = reinterpret_cast<uint32_t*>(g_smem.data);
    const size_t words = round_up(std::max<size_t>(g_smem.bytes, 1), 16) / 4;
    std::fill(w, w + words, kSignallingNaN);
  }
  for (;;) {
    bool any_waiting = false;
    for (size_t i = 0; i < n; ++i) {
      Fiber& f = fibers[i];
      if (f.wait != Wait::None) {
        any_waiting |= f.wait != Wait::Done;
        continue;
      }
      g_current = &f;
      asan_enter_fiber(stack_for(i));
      swapcontext(&g_launch->sched, &f.ctx);
      asan_back_in_scheduler();
      if (g_launch->failed) return;
      any_waiting |= f.wait != Wait::Done;
    }
    g_current = nullptr;
    if (!any_waiting) break;
    const bool warps = release_warps();
    if (g_launch->failed) return;
    if (warps) continue;
    const bool block = release_block();
    if (g_launch->failed) return;
    if (block) continue;
    g_launch->failed = true;
    g_launch->error = describe_deadlock();
    return;
  }
  const std::string pads = check_pads();
  if (!pads.empty()) {
    g_launch->failed = true;
    g_launch->error = where_block() + ": some thread " + pads +
                      " (caught by the sentinel bytes around it, after the block ran, so the thread is not known)";
  }
}

}  // namespace

// ---- what the kernel calls --------------------------------------------------------------------

const uint3& current_thread_idx() {
  static const uint3 zero{};
  return g_current ? g_current->idx : zero;
}
unsigned current_thread_x() { return g_current ? g_current->idx.x : 0u; }
unsigned lane_id() { return g_current ? g_current->lane : 0u; }

void syncthreads() {
  if (!g_current) return;
  g_current->wait = Wait::Block;
  g_current->what = "__syncthreads";
  g_current->predicate = 1;
  yield();
}

int syncthreads_count(int predicate) {
  if (!g_current) return predicate != 0;
  g_current->wait = Wait::Block;
  g_current->what = "__syncthreads_count";
  g_current->predicate = predicate != 0;
  yield();
  return g_current->block_count;
}

namespace {
void warp_wait(unsigned mask, const char* what) {
  Fiber& f = *g_current;
  if (!(mask >> f.lane & 1u)) {
    std::string msg;
    {  // the stream is destroyed before the fiber is abandoned
      std::ostringstream os;
      os << what << " is called by lane " << f.lane << " with mask 0x" << std::hex << mask
         << ", which does not include the caller";
      msg = os.str();
    }
    fail_here(std::move(msg));
  }
  f.wait = Wait::Warp;
  f.what = what;
  f.mask = mask;
  yield();
}
}  // namespace

void syncwarp(unsigned mask, const char* what) {
  if (!g_current) return;
  g_current->src = -1;
  g_current->predicate = 0;
  warp_wait(mask, what);
}

void warp_exchange(unsigned mask, const void* value, void* out, size_t bytes, int src, const char* what) {
  if (!g_current) {
    std::memcpy(out, value, bytes);
    return;
  }
  Fiber& f = *g_current;
  std::memcpy(f.value, value, bytes);
  f.value_bytes = bytes;
  f.src = src;
  f.predicate = 0;
  warp_wait(mask, what);
  std::memcpy(out, f.out, bytes);
}

unsigned warp_ballot(unsigned mask, bool predicate, const char* what) {
  if (!g_current) return predicate ? 1u : 0u;
  Fiber& f = *g_current;
  f.src = -1;
  f.predicate = predicate;
  warp_wait(mask, what);
  return f.ballot;
}

void* dynamic_shared_memory() { return g_smem.data; }

// ---- the launch ---------------------------------------------------------------------------------

int emulated_sm() {
  static const int sm = static_cast<int>(env_size("NNLAB_EMU_SM", 80));
  return sm;
}

namespace {
size_t smem_limit() { return emulated_sm() >= 90 ? 227 * 1024 : emulated_sm() >= 80 ? 163 * 1024 : 64 * 1024; }

std::map<const void*, size_t>& max_dynamic_smem() {
  static auto* m = new std::map<const void*, size_t>();  // never destroyed, like the allocations
  return *m;
}

constexpr size_t kDefaultDynamicSmem = 48 * 1024;

void check_config(const char* name, const void* kernel, dim3 grid, dim3 block, size_t smem) {
  const unsigned long long threads = 1ull * block.x * block.y * block.z;
  std::string why;
  if (grid.x == 0 || grid.y == 0 || grid.z == 0 || threads == 0) {
    why = "a grid or block dimension is 0";
  } else if (threads > 1024) {
    why = std::to_string(threads) + " threads per block (at most 1024)";
  } else if (block.z > 64) {
    why = "blockDim.z = " + std::to_string(block.z) + " (at most 64)";
  } else if (grid.y > 65535 || grid.z > 65535) {
    why = "gridDim.y or gridDim.z above 65535";
  } else if (grid.x > 2147483647u) {
    why = "gridDim.x above 2^31 - 1";
  } else if (smem > smem_limit()) {
    why = std::to_string(smem) + " bytes of dynamic shared memory (this device allows " +
          std::to_string(smem_limit()) + " per block)";
  } else if (smem > kDefaultDynamicSmem) {
    const auto it = max_dynamic_smem().find(kernel);
    if (it == max_dynamic_smem().end() || it->second < smem) {
      why = std::to_string(smem) + " bytes of dynamic shared memory: above 48 KiB a kernel must first raise its "
            "limit, cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, " +
            std::to_string(smem) + "), as a GPU requires";
    }
  }
  if (!why.empty()) {
    g_last_error = cudaErrorInvalidConfiguration;
    throw LaunchError("kernel '" + std::string(name) + "' (grid " + dim_str(grid) + ", block " + dim_str(block) +
                      "): invalid launch configuration: " + why);
  }
}
}  // namespace

void set_max_dynamic_smem(const void* kernel, int bytes) {
  max_dynamic_smem()[kernel] = bytes > 0 ? static_cast<size_t>(bytes) : 0;
}

void run_launch(const char* name, const void* kernel, dim3 grid, dim3 block, size_t dynamic_smem, KernelBody body,
                void* closure) {
  if (g_launch) throw LaunchError(std::string("kernel '") + name + "' launched from inside a kernel");
  check_config(name, kernel, grid, block, dynamic_smem);
  Launch launch;
  launch.name = name;
  launch.grid = grid;
  launch.block = block;
  launch.body = body;
  launch.closure = closure;
  const size_t n = static_cast<size_t>(block.x) * block.y * block.z;
  launch.fibers.resize(n);
  for (unsigned z = 0, i = 0; z < block.z; ++z) {
    for (unsigned y = 0; y < block.y; ++y) {
      for (unsigned x = 0; x < block.x; ++x, ++i) {
        Fiber& f = launch.fibers[i];
        f.idx = {x, y, z};
        f.linear = i;
        f.lane = i % 32;
        f.warp = i / 32;
      }
    }
  }
  stack_for(n - 1);  // map the stacks before any fiber runs
  g_smem = dynamic_smem ? map_guarded(dynamic_smem) : Allocation{};
  g_launch = &launch;
  g_grid_dim = grid;
  g_block_dim = block;
  install_handlers();
  const bool trap = fp_trap_enabled();
  if (trap) {
    feclearexcept(FE_ALL_EXCEPT);
    feenableexcept(FE_INVALID);
  }
  for (unsigned z = 0; z < grid.z && !launch.failed; ++z) {
    for (unsigned y = 0; y < grid.y && !launch.failed; ++y) {
      for (unsigned x = 0; x < grid.x && !launch.failed; ++x) {
        g_block_idx = {x, y, z};
        run_block();
      }
    }
  }
  if (trap) {
    fedisableexcept(FE_ALL_EXCEPT);
    feclearexcept(FE_ALL_EXCEPT);
  }
  restore_handlers();
  g_current = nullptr;
  g_launch = nullptr;
  if (g_smem.map) munmap(g_smem.map, g_smem.map_bytes);
  g_smem = Allocation{};
  if (launch.failed) {
    g_last_error = cudaErrorLaunchFailure;
    throw LaunchError(launch.error);
  }
}

size_t bytes_allocated() { return g_bytes_allocated; }

}  // namespace cudaemu

// ---- the runtime API ----------------------------------------------------------------------------

using cudaemu::allocations;
using cudaemu::g_last_error;

namespace {
cudaError_t fail(cudaError_t e) {
  g_last_error = e;
  return e;
}
bool is_device(const void* p, size_t bytes) {
  const cudaemu::Allocation* a = cudaemu::find_allocation(p, false);
  if (!a) return bytes == 0 && p != nullptr;
  return static_cast<const char*>(p) + bytes <= a->data + a->bytes;
}
}  // namespace

const char* cudaGetErrorString(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorInvalidDevicePointer: return "invalid device pointer";
    case cudaErrorInvalidMemcpyDirection: return "invalid copy direction for memcpy";
    case cudaErrorNoDevice: return "no CUDA-capable device is detected";
    case cudaErrorLaunchFailure: return "unspecified launch failure";
  }
  return "unknown error";
}
const char* cudaGetErrorName(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
    case cudaErrorInvalidDevicePointer: return "cudaErrorInvalidDevicePointer";
    case cudaErrorInvalidMemcpyDirection: return "cudaErrorInvalidMemcpyDirection";
    case cudaErrorNoDevice: return "cudaErrorNoDevice";
    case cudaErrorLaunchFailure: return "cudaErrorLaunchFailure";
  }
  return "cudaErrorUnknown";
}
cudaError_t cudaGetLastError() {
  const cudaError_t e = g_last_error;
  g_last_error = cudaSuccess;
  return e;
}
cudaError_t cudaPeekAtLastError() { return g_last_error; }
cudaError_t cudaGetDeviceCount(int* count) {
  *count = 1;
  return cudaSuccess;
}
cudaError_t cudaSetDevice(int device) { return device == 0 ? cudaSuccess : fail(cudaErrorInvalidValue); }
cudaError_t cudaGetDevice(int* device) {
  *device = 0;
  return cudaSuccess;
}
cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device) {
  if (device != 0) return fail(cudaErrorInvalidValue);
  *prop = cudaDeviceProp{};
  std::snprintf(prop->name, sizeof prop->name, "nnlab CUDA emulator (on the CPU)");
  const long pages = sysconf(_SC_PHYS_PAGES);
  prop->totalGlobalMem = static_cast<size_t>(pages > 0 ? pages : 0) * static_cast<size_t>(sysconf(_SC_PAGESIZE));
  prop->sharedMemPerBlock = 48 * 1024;
  prop->sharedMemPerBlockOptin = cudaemu::smem_limit();
  prop->regsPerBlock = 65536;
  prop->warpSize = 32;
  prop->maxThreadsPerBlock = 1024;
  prop->maxThreadsDim[0] = prop->maxThreadsDim[1] = 1024;
  prop->maxThreadsDim[2] = 64;
  prop->maxGridSize[0] = 2147483647;
  prop->maxGridSize[1] = prop->maxGridSize[2] = 65535;
  prop->major = cudaemu::emulated_sm() / 10;
  prop->minor = cudaemu::emulated_sm() % 10;
  prop->multiProcessorCount = 1;
  prop->l2CacheSize = 1 << 20;
  prop->maxThreadsPerMultiProcessor = 2048;
  return cudaSuccess;
}
cudaError_t cudaDeviceSynchronize() { return cudaSuccess; }

cudaError_t cudaMalloc(void** ptr, size_t bytes) {
  if (!ptr) return fail(cudaErrorInvalidValue);
  cudaemu::Allocation a = cudaemu::map_guarded(bytes);
  if (!a.map) {
    *ptr = nullptr;
    return fail(cudaErrorMemoryAllocation);
  }
  std::memset(a.data, 0xFF, bytes);  // as if garbage: an all-ones float is a NaN
  allocations()[reinterpret_cast<uintptr_t>(a.data)] = a;
  cudaemu::g_bytes_allocated += bytes;
  *ptr = a.data;
  return cudaSuccess;
}
cudaError_t cudaFree(void* ptr) {
  if (!ptr) return cudaSuccess;
  auto it = allocations().find(reinterpret_cast<uintptr_t>(ptr));
  if (it == allocations().end()) return fail(cudaErrorInvalidDevicePointer);
  cudaemu::g_bytes_allocated -= it->second.bytes;
  munmap(it->second.map, it->second.map_bytes);
  allocations().erase(it);
  return cudaSuccess;
}
cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
  if (bytes == 0) return cudaSuccess;
  if (!dst || !src) return fail(cudaErrorInvalidValue);
  const bool dst_dev = is_device(dst, bytes), src_dev = is_device(src, bytes);
  bool ok = true;
  switch (kind) {
    case cudaMemcpyHostToDevice: ok = dst_dev && !cudaemu::find_allocation(src, false); break;
    case cudaMemcpyDeviceToHost: ok = src_dev && !cudaemu::find_allocation(dst, false); break;
    case cudaMemcpyDeviceToDevice: ok = dst_dev && src_dev; break;
    case cudaMemcpyHostToHost: ok = !cudaemu::find_allocation(dst, false) && !cudaemu::find_allocation(src, false); break;
    case cudaMemcpyDefault: {
      // a pointer inside a buffer must fit in it
      const bool d_in = cudaemu::find_allocation(dst, false) != nullptr;
      const bool s_in = cudaemu::find_allocation(src, false) != nullptr;
      ok = (!d_in || dst_dev) && (!s_in || src_dev);
      break;
    }
  }
  if (!ok) return fail(cudaErrorInvalidValue);
  std::memmove(dst, src, bytes);
  return cudaSuccess;
}
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind, cudaStream_t) {
  return cudaMemcpy(dst, src, bytes, kind);
}
cudaError_t cudaMemset(void* ptr, int value, size_t bytes) {
  if (bytes == 0) return cudaSuccess;
  if (!is_device(ptr, bytes)) return fail(cudaErrorInvalidValue);
  std::memset(ptr, value, bytes);
  return cudaSuccess;
}
cudaError_t cudaMemsetAsync(void* ptr, int value, size_t bytes, cudaStream_t) { return cudaMemset(ptr, value, bytes); }
cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total_bytes) {
  cudaDeviceProp p;
  cudaGetDeviceProperties(&p, 0);
  *total_bytes = p.totalGlobalMem;
  *free_bytes = p.totalGlobalMem > cudaemu::g_bytes_allocated ? p.totalGlobalMem - cudaemu::g_bytes_allocated : 0;
  return cudaSuccess;
}

struct CUevent_st {
  std::chrono::steady_clock::time_point t;
  bool recorded = false;
};
cudaError_t cudaEventCreate(cudaEvent_t* event) {
  *event = new CUevent_st{};
  return cudaSuccess;
}
cudaError_t cudaEventDestroy(cudaEvent_t event) {
  delete event;
  return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t) {
  if (!event) return fail(cudaErrorInvalidValue);
  event->t = std::chrono::steady_clock::now();  // launches are synchronous here
  event->recorded = true;
  return cudaSuccess;
}
cudaError_t cudaEventSynchronize(cudaEvent_t event) { return event ? cudaSuccess : fail(cudaErrorInvalidValue); }
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  if (!start || !end || !start->recorded || !end->recorded) return fail(cudaErrorInvalidValue);
  *ms = std::chrono::duration<float, std::milli>(end->t - start->t).count();
  return cudaSuccess;
}
