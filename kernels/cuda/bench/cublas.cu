// kernels/cuda/bench/cublas.cu: cuBLAS's SGEMM as the matmul ladder's peer
// (kernels/cuda/bench/cublas.h). Compiled only when the build has nvcc; it calls the host
// API alone, no kernels of its own.
#include "kernels/cuda/bench/cublas.h"

#include <cublas_v2.h>

#include <string>

namespace kernels::cuda::bench {

namespace {

std::string describe(cublasStatus_t s) {
  return std::string(cublasGetStatusName(s)) + " (" + cublasGetStatusString(s) + ")";
}

// One handle for the process, created on first use (cublasCreate costs milliseconds and
// allocates device memory: never inside a timed run). It is never destroyed: at static
// destruction the CUDA runtime may already be shut down.
struct Handle {
  cublasHandle_t handle = nullptr;
  cublasStatus_t created = CUBLAS_STATUS_NOT_INITIALIZED;
};
const Handle& the_handle() {
  static const Handle h = [] {
    Handle x;
    x.created = cublasCreate(&x.handle);
    return x;
  }();
  return h;
}

}  // namespace

bool cublas_available(Device& dev, std::string* why) {
  if (dev.info().emulated) {
    if (why) *why = "the emulator has no cuBLAS";
    return false;
  }
  const Handle& h = the_handle();
  if (h.created != CUBLAS_STATUS_SUCCESS) {
    if (why) *why = "cublasCreate failed: " + describe(h.created);
    return false;
  }
  return true;
}

void cublas_sgemm(float* C, const float* A, const float* B, int M, int N, int K, bool tf32) {
  const Handle& h = the_handle();
  if (h.created != CUBLAS_STATUS_SUCCESS) throw Error("cuBLAS: cublasCreate failed: " + describe(h.created));
  // CUBLAS_DEFAULT_MATH: fp32 FMAs only. CUBLAS_TF32_TENSOR_OP_MATH: cuBLAS may round the
  // inputs to TF32 and use tensor cores (compute capability 8.0+), as v8 does.
  cublasStatus_t s = cublasSetMathMode(h.handle, tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH);
  if (s != CUBLAS_STATUS_SUCCESS) throw Error("cublasSetMathMode: " + describe(s));
  // cuBLAS is column-major. A row-major (R, C) matrix is, read column-major, its transpose
  // (C, R) with leading dimension C. So ask for C^T (N,M) = B^T (N,K) . A^T (K,M): the
  // column-major product of B (read as B^T, ld N) and A (read as A^T, ld K), written into
  // C read as C^T (ld N), which is row-major C. No transposes are performed.
  const float alpha = 1.0f, beta = 0.0f;
  s = cublasSgemm(h.handle, CUBLAS_OP_N, CUBLAS_OP_N, N, M, K, &alpha, B, N, A, K, &beta, C, N);
  if (s != CUBLAS_STATUS_SUCCESS) {
    throw Error("cublasSgemm (M=" + std::to_string(M) + " N=" + std::to_string(N) + " K=" + std::to_string(K) +
                (tf32 ? ", TF32" : ", fp32") + "): " + describe(s));
  }
}

}  // namespace kernels::cuda::bench
