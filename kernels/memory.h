// kernels/memory.h: where buffers live, and the one owning buffer type of the tree.
//
// A Memory is a place that can hold bytes: the process's host memory (host_memory()), a
// GPU's memory or the CUDA emulator's (kernels::cuda::Device is a Memory). Code that only
// does pointer arithmetic and hands the pointers to kernels (the GPT model, the CUDA tests)
// never needs to know which; the few places that must READ the bytes on the CPU copy them
// out with to_host, which is a plain memcpy on the host.
//
//   Memory& mem = kernels::host_memory();          // or a kernels::cuda::Device
//   kernels::Array<float> x(mem, n);               // n zero-filled floats, in that memory
//   x.upload(host.data(), host.size());
//   std::vector<float> h = x.to_vector();
//
// kernels/ depends on nothing else of ours, so failures are std exceptions: OutOfMemory
// (a std::runtime_error) names the request; a device adds what it reports as free.
// Layers above translate them to their own errors where they want a hint for their users
// (gpt/model.cpp: "lower --batch-size").
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace kernels {

// An allocation a Memory could not make; the message says how many bytes and where.
class OutOfMemory : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class Memory {
 public:
  virtual ~Memory() = default;
  // Can the CPU dereference these pointers? (host memory: yes; a GPU's: no)
  virtual bool is_host() const = 0;
  // "host memory", "the device memory of NVIDIA H100 80GB HBM3"
  virtual std::string where() const = 0;
  // `bytes` bytes, uninitialised: whatever the memory gives (host and GPU: garbage; the
  // emulator: NaN bytes, so an output never written is noticed). OutOfMemory naming the
  // request when it cannot. (Array(mem, n) zero-fills; Array(mem, n, uninitialized) not.)
  virtual void* allocate(size_t bytes) = 0;
  virtual void release(void* p) = 0;
  // Sets every byte to `byte` (0xFF makes every float a NaN).
  virtual void fill(void* dst, int byte, size_t bytes) = 0;
  virtual void to_host(void* host_dst, const void* src, size_t bytes) = 0;
  virtual void from_host(void* dst, const void* host_src, size_t bytes) = 0;
  virtual void copy(void* dst, const void* src, size_t bytes) = 0;

  void zero(void* dst, size_t bytes) { fill(dst, 0, bytes); }
};

// The process's host memory: 64-byte aligned (a cache line, an AVX-512 vector: the SIMD
// kernels read these). A request larger than the machine's RAM is refused with
// OutOfMemory instead of ending in swap or the OOM killer.
Memory& host_memory();

// Array(mem, n, uninitialized): keep what Memory::allocate gives (the CUDA tests want the
// emulator's NaN bytes; a benchmark does not want to pay for a fill).
struct Uninitialized {};
inline constexpr Uninitialized uninitialized{};

// An owning array of n T's in one Memory. Copies are deep (in the same memory); moves keep
// the allocation. Element access and iteration are for host memory only.
template <class T>
class Array {
 public:
  Array() = default;
  // n zero-filled T's
  Array(Memory& mem, size_t n) : Array(mem, n, uninitialized) { zero(); }
  Array(Memory& mem, size_t n, Uninitialized) : mem_(&mem), n_(n) {
    if (n > 0) p_ = static_cast<T*>(mem.allocate(n * sizeof(T)));
  }
  // A copy of `host`, in mem.
  Array(Memory& mem, const std::vector<T>& host) : Array(mem, host.size(), uninitialized) { upload(host); }
  Array(Memory& mem, const std::vector<T>& host, Uninitialized) : Array(mem, host) {}  // the same
  Array(const Array& o) : Array(*o.mem_, o.n_, uninitialized) {
    if (n_ > 0) mem_->copy(p_, o.p_, bytes());
  }
  Array& operator=(const Array& o) {
    if (this != &o) {
      Array tmp(o);
      swap(tmp);
    }
    return *this;
  }
  Array(Array&& o) noexcept { swap(o); }
  Array& operator=(Array&& o) noexcept {
    if (this != &o) {
      Array tmp(std::move(o));
      swap(tmp);
    }
    return *this;
  }
  ~Array() { reset(); }
  void swap(Array& o) noexcept {
    std::swap(mem_, o.mem_);
    std::swap(p_, o.p_);
    std::swap(n_, o.n_);
  }
  // Frees the allocation; the array is then empty (in the same memory).
  void reset() {
    if (p_ != nullptr) mem_->release(p_);
    p_ = nullptr;
    n_ = 0;
  }

  T* data() { return p_; }
  const T* data() const { return p_; }
  size_t size() const { return n_; }
  size_t bytes() const { return n_ * sizeof(T); }
  bool empty() const { return n_ == 0; }
  Memory& memory() const { return *mem_; }

  void zero() { fill_bytes(0); }
  // Sets every byte (0xFF makes every float a NaN: an output never written stays NaN).
  void fill_bytes(int byte) {
    if (n_ > 0) mem_->fill(p_, byte, bytes());
  }
  // Copies n elements in from / out to the host, starting at element `at`;
  // std::out_of_range past the end.
  void upload(const T* host, size_t n, size_t at = 0) {
    check_range(n, at);
    if (n > 0) mem_->from_host(p_ + at, host, n * sizeof(T));
  }
  void upload(const std::vector<T>& host, size_t at = 0) { upload(host.data(), host.size(), at); }
  void download(T* host, size_t n, size_t at = 0) const {
    check_range(n, at);
    if (n > 0) mem_->to_host(host, p_ + at, n * sizeof(T));
  }
  std::vector<T> to_vector() const {
    std::vector<T> h(n_);
    download(h.data(), n_);
    return h;
  }

  // host memory only
  T& operator[](size_t i) { return p_[i]; }
  const T& operator[](size_t i) const { return p_[i]; }
  T* begin() { return p_; }
  T* end() { return p_ + n_; }
  const T* begin() const { return p_; }
  const T* end() const { return p_ + n_; }
  bool operator==(const Array& o) const { return to_vector() == o.to_vector(); }

 private:
  void check_range(size_t n, size_t at) const {
    if (at > n_ || n > n_ - at) {
      throw std::out_of_range("kernels::Array: elements [" + std::to_string(at) + ", " + std::to_string(at + n) +
                              ") of an array of " + std::to_string(n_) + " in " + mem_->where());
    }
  }

  Memory* mem_ = &host_memory();
  T* p_ = nullptr;
  size_t n_ = 0;
};

}  // namespace kernels
