// kernels/cuda/cuda.h: what every .cu file of kernels/cuda/ includes first. The same source
// is compiled twice (kernels/cuda/CMakeLists.txt):
//
//   by nvcc         -> the real GPU build, namespace kernels::cuda::hw (when nvcc exists)
//   by the host C++ -> the emulated build, namespace kernels::cuda::emu (always), where
//                      kernels/cuda/emu/emu.h supplies threadIdx, __syncthreads, shuffles,
//                      atomics and the runtime API, and a launch runs on the CPU.
//
// Inside a .cu file, write `namespace kernels::cuda::NNLAB_CUDA_NS { ... }` so the two
// builds can be linked into one program (the lesson program and the tests pick at run time).
//
// The three things a kernel file needs beyond standard CUDA:
//   launch(name, kernel, grid, block, smem, args...)  instead of kernel<<<...>>>(args...),
//       which C++ cannot parse; it checks the launch and throws Error naming the kernel;
//   dynamic_shared<T>()  instead of `extern __shared__ T smem[]`, which C++ cannot parse
//       either (and which clashes between kernels of different T even in CUDA);
//   check(cudaMalloc(...), "what")  turns a runtime error into an Error.
#pragma once

#include <stdexcept>
#include <string>
#include <utility>

#include "kernels/cuda/device.h"  // Error, Kernels

#if defined(__CUDACC__)
#include <cuda_runtime.h>
#define NNLAB_CUDA_NS hw
#else
#include "kernels/cuda/emu/emu.h"
#define NNLAB_CUDA_NS emu
#endif

// True in code that runs on the GPU and may use compute capability >= N features; the
// emulator runs every version (it reports compute capability NNLAB_EMU_SM, default 8.0).
#if defined(NNLAB_EMULATED)
#define NNLAB_CUDA_ARCH_AT_LEAST(N) 1
#elif defined(__CUDA_ARCH__)
#define NNLAB_CUDA_ARCH_AT_LEAST(N) (__CUDA_ARCH__ >= (N))
#else
#define NNLAB_CUDA_ARCH_AT_LEAST(N) 0
#endif

namespace kernels::cuda {

inline void check(cudaError_t err, const std::string& what) {
  if (err != cudaSuccess) {
    throw Error(what + ": " + cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ")");
  }
}

__host__ __device__ inline constexpr int ceil_div(int a, int b) { return (a + b - 1) / b; }

// kernel<<<grid, block, smem>>>(args...), checked. On the GPU a launch is asynchronous:
// errors inside the kernel surface at the next synchronising call (check() of it names
// that call); the emulator runs it now and names the kernel, block and thread.
template <class... P, class... A>
void launch(const char* name, void (*kernel)(P...), dim3 grid, dim3 block, size_t smem, A&&... args) {
#if defined(__CUDACC__)
  kernel<<<grid, block, smem>>>(std::forward<A>(args)...);
  check(cudaGetLastError(), std::string("launching kernel '") + name + "'");
#else
  try {
    ::cudaemu::launch(name, kernel, grid, block, smem, std::forward<A>(args)...);
  } catch (const ::cudaemu::LaunchError& e) {
    throw Error(e.what());
  }
#endif
}

// The block's dynamic shared memory (the launch's `smem` bytes), as T*.
template <class T>
__device__ __forceinline__ T* dynamic_shared() {
#if defined(__CUDACC__)
  extern __shared__ __align__(16) unsigned char nnlab_dynamic_smem[];
  return reinterpret_cast<T*>(nnlab_dynamic_smem);
#else
  return static_cast<T*>(::cudaemu::dynamic_shared_memory());
#endif
}

}  // namespace kernels::cuda
