// kernels/cuda/bench/cublas.cu: cuBLAS's SGEMM and GEMM as the matmul ladder's peers
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

void cublas_gemm(float* C, const float* A, const float* B, int M, int N, int K, const MatmulArgs& args,
                 const float* ones, CublasMath math) {
  const Handle& h = the_handle();
  if (h.created != CUBLAS_STATUS_SUCCESS) throw Error("cuBLAS: cublasCreate failed: " + describe(h.created));
  const char* what = math == CublasMath::tf32 ? ", TF32" : math == CublasMath::bf16 ? ", BF16" : ", fp32";
  auto fail = [&](const char* call, cublasStatus_t st) {
    return Error(std::string(call) + " (M=" + std::to_string(M) + " N=" + std::to_string(N) + " K=" +
                 std::to_string(K) + what + "): " + describe(st));
  };
  // The compute type alone says how to multiply: the math mode back to its default, in case
  // cublas_sgemm left TF32 on (it would let CUBLAS_COMPUTE_32F use TF32 too).
  cublasStatus_t s = cublasSetMathMode(h.handle, CUBLAS_DEFAULT_MATH);
  if (s != CUBLAS_STATUS_SUCCESS) throw fail("cublasSetMathMode", s);
  const cublasComputeType_t compute = math == CublasMath::tf32   ? CUBLAS_COMPUTE_32F_FAST_TF32
                                      : math == CublasMath::bf16 ? CUBLAS_COMPUTE_32F_FAST_16BF
                                                                 : CUBLAS_COMPUTE_32F;
  // Column-major, as cublas_sgemm: row-major C (M,N) is column-major C^T (N,M), ld N, and
  // C^T = op(B)^T . op(A)^T. Read column-major, B stored (K,N) is B^T (N,K), ld N: op(B)^T
  // as it is (OP_N); B stored (N,K) with trans_b is (K,N) = op(B), ld K: OP_T gives
  // op(B)^T. Likewise A stored (M,K) is A^T (K,M) = op(A)^T, ld K (OP_N); stored (K,M) with
  // trans_a it reads as op(A) (M,K), ld M (OP_T).
  const cublasOperation_t op_b = args.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_a = args.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  const int ldb = args.trans_b ? K : N;
  const int lda = args.trans_a ? M : K;
  const float alpha = 1.0f, beta = args.accumulate ? 1.0f : 0.0f;
  s = cublasGemmEx(h.handle, op_b, op_a, N, M, K, &alpha, B, CUDA_R_32F, ldb, A, CUDA_R_32F, lda, &beta, C, CUDA_R_32F,
                   N, compute, CUBLAS_GEMM_DEFAULT);
  if (s != CUBLAS_STATUS_SUCCESS) throw fail("cublasGemmEx", s);
  if (args.bias) {
    // C^T (N,M) += bias (N) . ones (M)^T: every column of C^T (a row of C) gets the bias.
    if (!ones) throw Error("cublas_gemm: a bias needs the ones vector");
    s = cublasSger(h.handle, N, M, &alpha, args.bias, 1, ones, 1, C, N);
    if (s != CUBLAS_STATUS_SUCCESS) throw fail("cublasSger", s);
  }
}

void cublas_gemm_int8(int32_t* C, const int8_t* A, const int8_t* B, int M, int N, int K) {
  const Handle& h = the_handle();
  if (h.created != CUBLAS_STATUS_SUCCESS) throw Error("cuBLAS: cublasCreate failed: " + describe(h.created));
  cublasStatus_t s = cublasSetMathMode(h.handle, CUBLAS_DEFAULT_MATH);
  if (s != CUBLAS_STATUS_SUCCESS) throw Error("cublasSetMathMode: " + describe(s));
  // Column-major, as cublas_gemm: row-major C (M,N) is column-major C^T (N,M), ld N, and
  // C^T = B . A^T. B stored (N,K) row-major reads column-major as B^T (K,N), ld K: OP_T gives
  // B. A stored (M,K) reads as A^T (K,M), ld K: OP_N. This "TN" form, both operands K-major,
  // is the layout cuBLAS's int8 kernels want. alpha and beta are int32 with COMPUTE_32I.
  const int32_t alpha = 1, beta = 0;
  s = cublasGemmEx(h.handle, CUBLAS_OP_T, CUBLAS_OP_N, N, M, K, &alpha, B, CUDA_R_8I, K, A, CUDA_R_8I, K, &beta, C,
                   CUDA_R_32I, N, CUBLAS_COMPUTE_32I, CUBLAS_GEMM_DEFAULT);
  if (s != CUBLAS_STATUS_SUCCESS) {
    throw Error("cublasGemmEx (int8, M=" + std::to_string(M) + " N=" + std::to_string(N) + " K=" + std::to_string(K) +
                "): " + describe(s));
  }
}

}  // namespace kernels::cuda::bench
