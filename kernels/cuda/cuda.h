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

// True in code compiled for a GPU of compute capability `sm` (10 * major + minor: one of the
// NNLAB_SM_* of kernels/cuda/device.h) or newer: the guard around code a version needs a
// newer GPU for, written with the same NNLAB_SM_* as the version's needs.min_sm:
//
//   #if NNLAB_CUDA_SM_AT_LEAST(NNLAB_SM_AMPERE)
//     ... wmma ...
//   #else
//     needs_newer_gpu<NNLAB_SM_AMPERE>();
//   #endif
//
// The emulator runs every version (it reports compute capability NNLAB_EMU_SM, default 8.0).
#if defined(NNLAB_EMULATED)
#define NNLAB_CUDA_SM_AT_LEAST(sm) 1
#elif defined(__CUDA_ARCH__)
#define NNLAB_CUDA_SM_AT_LEAST(sm) (__CUDA_ARCH__ >= (sm) * 10)
#else
#define NNLAB_CUDA_SM_AT_LEAST(sm) 0
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

#if defined(__CUDACC__)
// What a kernel's body is on a GPU older than its version needs (the #else of its
// NNLAB_CUDA_SM_AT_LEAST guard): needs.min_sm keeps the harness and the trainer from
// launching it there; if something launches it anyway, it traps (the next synchronising call
// fails with "unspecified launch failure") instead of leaving its output unwritten. The asm
// comment names the capability in the PTX, where scripts/check_old_gpus.py reads it.
template <int Sm>
__device__ __forceinline__ void needs_newer_gpu() {
  asm volatile("// nnlab: compiled out, needs compute capability %0" ::"n"(Sm));
  __trap();
}
#endif

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
