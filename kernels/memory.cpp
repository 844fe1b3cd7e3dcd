// kernels/memory.cpp: the host's Memory (kernels/memory.h).
#include "kernels/memory.h"

#include <cstring>
#include <new>

#include <unistd.h>

namespace kernels {

namespace {

// The machine's RAM in bytes (0: unknown).
uint64_t physical_memory_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page = ::sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) : 0;
}

std::string mib(uint64_t bytes) { return std::to_string(bytes / (1 << 20)) + " MiB"; }

class HostMemory final : public Memory {
 public:
  bool is_host() const override { return true; }
  std::string where() const override { return "host memory"; }
  void* allocate(size_t bytes) override {
    // More than the machine has can only end in swapping or the OOM killer once the pages
    // are touched: refuse it with a message instead.
    // Asked once: sysconf reads the kernel's counters, far too slow for every small
    // allocation (nn::Tensor allocates per batch in the lessons).
    static const uint64_t ram = physical_memory_bytes();
    if (ram != 0 && bytes > ram) {
      throw OutOfMemory("asked for " + mib(bytes) + " of host memory, more than this machine's " + mib(ram));
    }
    void* p = ::operator new(bytes, std::align_val_t{64}, std::nothrow);
    if (p == nullptr) throw OutOfMemory("out of host memory: asked for " + mib(bytes));
    return p;
  }
  void release(void* p) override { ::operator delete(p, std::align_val_t{64}); }
  void fill(void* p, int byte, size_t bytes) override { std::memset(p, byte, bytes); }
  void to_host(void* dst, const void* src, size_t bytes) override { std::memcpy(dst, src, bytes); }
  void from_host(void* dst, const void* src, size_t bytes) override { std::memcpy(dst, src, bytes); }
  void copy(void* dst, const void* src, size_t bytes) override { std::memcpy(dst, src, bytes); }
};

}  // namespace

Memory& host_memory() {
  static HostMemory m;
  return m;
}

}  // namespace kernels
