#include "app/info.h"

#include <omp.h>

#include <iostream>
#include <thread>

#include "nn/idx.h"

#ifdef NNLAB_HAVE_CUDA
#include "app/cuda_info.h"
#endif

namespace app {

int run_info() {
  std::cout << "nnlab build\n";
#if defined(__clang__)
  std::cout << "  compiler        clang " << __clang_major__ << "." << __clang_minor__ << "\n";
#elif defined(__GNUC__)
  std::cout << "  compiler        gcc " << __GNUC__ << "." << __GNUC_MINOR__ << "\n";
#elif defined(_MSC_VER)
  std::cout << "  compiler        msvc " << _MSC_VER << "\n";
#endif
  std::cout << "  SIMD compiled   ";
#if defined(__AVX512F__)
  std::cout << "AVX-512F ";
#endif
#if defined(__AVX2__)
  std::cout << "AVX2 ";
#endif
#if defined(__FMA__)
  std::cout << "FMA ";
#endif
#if defined(__ARM_NEON)
  std::cout << "NEON ";
#endif
  std::cout << "(scalar fallback always)\n";
  std::cout << "  OpenMP threads  " << omp_get_max_threads() << " (hardware threads "
            << std::thread::hardware_concurrency() << "; set OMP_NUM_THREADS or --threads)\n";
  std::cout << "  gzip IDX files  " << (nn::idx_gzip_supported() ? "yes (zlib)" : "no (gunzip them first)")
            << "\n";
#ifdef NNLAB_HAVE_CUDA
  std::cout << "  CUDA            built; " << cuda_device_summary() << "\n";
#else
  std::cout << "  CUDA            not built (no nvcc found, or -DNNLAB_CUDA=OFF)\n";
#endif
  return 0;
}

}  // namespace app
