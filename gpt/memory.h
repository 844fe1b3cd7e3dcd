// gpt/memory.h: where a GPT's tensors live. The naive and cpu backends keep them in host
// memory; the cuda backend in the GPU's (or the emulator's). The model code (gpt/model.cpp)
// only does pointer arithmetic on them and hands the pointers to its backend, so it never
// needs to know which; the few places that must READ a tensor on the CPU (checkpoints,
// sampling, dumps) copy it out with Memory::to_host, which is a plain copy on the host.
//
//   Memory& mem = backend.memory();
//   Array<float> x(mem, n);          // zero-filled, in that memory
//   std::vector<float> h = x.to_vector();
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace gpt {

class Memory {
 public:
  virtual ~Memory() = default;
  // Can the CPU dereference these pointers? (host memory: yes; a GPU's: no)
  virtual bool is_host() const = 0;
  // "host memory", "NVIDIA H100 80GB HBM3", "the CUDA emulator"
  virtual std::string where() const = 0;
  // `bytes` zero-filled bytes; nn::Error naming the request (and on a GPU the free memory)
  // when it cannot.
  virtual void* allocate(size_t bytes) = 0;
  virtual void release(void* p) = 0;
  virtual void zero(void* p, size_t bytes) = 0;
  virtual void to_host(void* host_dst, const void* src, size_t bytes) = 0;
  virtual void from_host(void* dst, const void* host_src, size_t bytes) = 0;
  virtual void copy(void* dst, const void* src, size_t bytes) = 0;
};

// The process's host memory (operator new, memcpy).
Memory& host_memory();

// An owning array of n T's in one Memory. Copies are deep (in the same memory); moves keep
// the allocation. Element access and iteration are for host memory only.
template <class T>
class Array {
 public:
  Array() = default;
  Array(Memory& mem, size_t n) : mem_(&mem), n_(n) {
    if (n > 0) p_ = static_cast<T*>(mem.allocate(n * sizeof(T)));
  }
  Array(const Array& o) : Array(*o.mem_, o.n_) {
    if (n_ > 0) mem_->copy(p_, o.p_, n_ * sizeof(T));
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
  ~Array() {
    if (p_ != nullptr) mem_->release(p_);
  }
  void swap(Array& o) noexcept {
    std::swap(mem_, o.mem_);
    std::swap(p_, o.p_);
    std::swap(n_, o.n_);
  }

  T* data() { return p_; }
  const T* data() const { return p_; }
  size_t size() const { return n_; }
  bool empty() const { return n_ == 0; }
  Memory& memory() const { return *mem_; }

  void zero() {
    if (n_ > 0) mem_->zero(p_, n_ * sizeof(T));
  }
  // Copies n elements in from / out to the host, starting at element `at`.
  void upload(const T* host, size_t n, size_t at = 0) {
    if (n > 0) mem_->from_host(p_ + at, host, n * sizeof(T));
  }
  void download(T* host, size_t n, size_t at = 0) const {
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
  Memory* mem_ = &host_memory();
  T* p_ = nullptr;
  size_t n_ = 0;
};

}  // namespace gpt
