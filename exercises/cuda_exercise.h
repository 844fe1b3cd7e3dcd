// exercises/cuda_exercise.h: what the CUDA exercises' .cu files (15-17, lesson 09) share:
// the host code around a kernel. It is already written; the exercises are the kernels.
//
// A CUDA exercise's .cu is compiled two ways (exercises/CMakeLists.txt):
//   - by the host C++ compiler against the emulator (kernels/cuda/emu/emu.h), always: that
//     is what `nnlab check` and ctest run, on any machine;
//   - by nvcc for a real GPU (target ex_NN_name_gpu), when the build found nvcc.
// kernels/cuda/cuda.h picks: it gives threadIdx, __syncthreads, the shuffles, cudaMalloc ...
// from the emulator or from CUDA, and launch(name, kernel, grid, block, smem, args...) in
// place of kernel<<<grid, block, smem>>>(args...) (which a C++ compiler cannot parse).
//
// The exercises' functions take HOST pointers, so their tests are plain C++ and never include
// this header: each function copies its inputs to the device, launches, and copies the
// result back.
#pragma once

#include <cstddef>

#include "kernels/cuda/cuda.h"

namespace ex_cuda {

// n T's of device memory (cudaMalloc), freed when it goes out of scope, optionally
// filled from the host. Every CUDA call is checked: a failure throws kernels::cuda::Error.
template <class T>
class DeviceArray {
 public:
  explicit DeviceArray(size_t n, const T* host = nullptr) : n_(n) {
    void* p = nullptr;
    kernels::cuda::check(cudaMalloc(&p, bytes()), "cudaMalloc");
    p_ = static_cast<T*>(p);
    if (host != nullptr) {
      kernels::cuda::check(cudaMemcpy(p_, host, bytes(), cudaMemcpyHostToDevice),
                           "copying the input to the device");
    }
  }
  ~DeviceArray() { cudaFree(p_); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;

  T* data() { return p_; }
  size_t bytes() const { return n_ * sizeof(T); }
  // Waits for the kernels launched before it (a copy to the host does): on a GPU an error
  // inside a kernel shows up here.
  void download(T* host) const {
    kernels::cuda::check(cudaMemcpy(host, p_, bytes(), cudaMemcpyDeviceToHost),
                         "copying the result back (errors inside the kernel show up here)");
  }

 private:
  size_t n_ = 0;
  T* p_ = nullptr;
};

// True in the emulated build. Some tests only make sense there (the emulator's misuse
// checks); on a GPU the same misuse is undefined behaviour: a hang, or garbage. (The tests
// ask the .cu, through ex::runs_on_emulator(): they are compiled by the host compiler even
// in the GPU build, so they cannot tell by themselves.)
#if defined(NNLAB_EMULATED)
constexpr bool kEmulated = true;
#else
constexpr bool kEmulated = false;
#endif

}  // namespace ex_cuda
