#include "app/info.h"

#include <omp.h>

#include <iostream>
#include <string>
#include <thread>

#include "kernels/simd.h"
#include "io/idx.h"

#ifdef NNLAB_HAVE_CUDA
#include "app/cuda_info.h"
#endif

#ifndef NNLAB_BUILD_COMPILER  // set by app/CMakeLists.txt
#define NNLAB_BUILD_COMPILER "unknown"
#define NNLAB_BUILD_TYPE "unknown"
#define NNLAB_BUILD_CPU_FLAGS "unknown"
#define NNLAB_BUILD_WORKAROUND ""
#define NNLAB_BUILD_CANARY "unknown"
#endif

namespace app {

namespace {

// The SIMD extensions this CPU reports at run time (not what the build was compiled for).
std::string cpu_simd_features() {
#if (defined(__GNUC__) || defined(__clang__)) && (defined(__x86_64__) || defined(__i386__))
  std::string s;
  if (__builtin_cpu_supports("avx512f")) s += "AVX-512F ";
  if (__builtin_cpu_supports("avx2")) s += "AVX2 ";
  if (__builtin_cpu_supports("fma")) s += "FMA ";
  if (__builtin_cpu_supports("sse4.2")) s += "SSE4.2 ";
  return s.empty() ? std::string("no AVX (x86)") : s;
#elif defined(__aarch64__)
  return "NEON (every aarch64 CPU)";
#else
  return "unknown (not an x86 or aarch64 build)";
#endif
}

}  // namespace

int run_info() {
  std::cout << "nnlab build\n";
  std::cout << "  compiler        " << NNLAB_BUILD_COMPILER << " (" << NNLAB_BUILD_TYPE << ")\n";
  std::cout << "  CPU flags       " << NNLAB_BUILD_CPU_FLAGS << "\n";
  std::cout << "  compiler check  " << NNLAB_BUILD_CANARY << "\n";
  const std::string workaround = NNLAB_BUILD_WORKAROUND;
  std::cout << "  workaround      " << (workaround.empty() ? "none" : workaround) << "\n";
  // The level the kernels were compiled for (kernels/simd.h picks it from the flags above),
  // and what this CPU could run: they differ for a portable build, or when the workaround
  // gave up AVX-512.
  std::cout << "  SIMD level      " << kernels::simd::Native::name << " (" << kernels::simd::Native::lanes
            << " float lanes; the portable C++ path is always built too)\n";
  std::cout << "  this CPU has    " << cpu_simd_features() << "\n";
  std::cout << "  OpenMP threads  " << omp_get_max_threads() << " (hardware threads "
            << std::thread::hardware_concurrency() << "; set OMP_NUM_THREADS or --threads)\n";
  std::cout << "  gzip IDX files  " << (nn::idx_gzip_supported() ? "yes (zlib)" : "no (gunzip them first)")
            << "\n";
#ifdef NNLAB_HAVE_CUDA
  const CudaDevices gpus = cuda_devices();
  std::cout << "  CUDA            built; " << gpus.summary << "\n";
  const bool have_gpu = gpus.count > 0;
#else
  std::cout << "  CUDA            not built (no nvcc found, or -DNNLAB_CUDA=OFF)\n";
  const bool have_gpu = false;
#endif
  // Without a GPU the CUDA half of the course still runs: every kernel is also compiled
  // for the emulator (kernels/cuda/emu), which is always built. Say so, with the commands.
  std::cout << "  CUDA emulator   always built: the same .cu kernels, run on the CPU, one thread\n"
            << "                  after another, catching races and out-of-bounds accesses\n"
            << "                  (lesson 09, section 9). Times on it say nothing about a GPU.\n";
  if (!have_gpu) {
    std::cout << "                  No GPU here, so the CUDA commands use it: try\n"
                 "                    nnlab lesson09 --part info\n"
                 "                    nnlab cuda bench matmul --device emu --quick\n"
                 "                    nnlab check --only 16_tiled_matmul\n";
  }
  return 0;
}

}  // namespace app
