// kernels/cuda/bench/cublas.h: cuBLAS's SGEMM and GEMM, the peers the matmul ladder is
// measured against in the GPU bench (kernels/cuda/bench/matmul.cpp). Only the bench links
// cuBLAS:
// the ladder, the lessons and the trainer never depend on it.
//
// cublas.cu implements it when the build has nvcc; cublas_none.cpp otherwise (available()
// says why not, and the bench lists no cuBLAS variants).
#pragma once

#include <cstdint>
#include <string>

#include "kernels/cuda/device.h"

namespace kernels::cuda::bench {

// Whether cuBLAS can run on `dev`: false for the emulator, in builds without nvcc, or when
// creating a cuBLAS handle fails; *why then says which.
bool cublas_available(Device& dev, std::string* why);

// C (M,N) = A (M,K) . B (K,N), row-major fp32 device pointers, the ladder's plain product,
// on the default stream (returns without waiting). tf32: allow tensor-core TF32 math
// (CUBLAS_TF32_TENSOR_OP_MATH, v8's and v10's peer); otherwise pure fp32 (CUBLAS_DEFAULT_MATH).
// Throws kernels::cuda::Error when cuBLAS fails.
void cublas_sgemm(float* C, const float* A, const float* B, int M, int N, int K, bool tf32);

// The int8 GEMM ladder's peer (kernels/cuda/bench/int8.cpp): C (M,N) int32 = A (M,K) int8 .
// B (N,K)^T int8, all row-major device pointers (kernels/cuda/device.h: Int8GemmFn), with
// cublasGemmEx on CUDA_R_8I inputs, a CUDA_R_32I output and CUBLAS_COMPUTE_32I. cuBLAS's
// int8 paths want K a multiple of 4 and 4-byte aligned pointers: callers pad K with zeros
// (exact: a zero byte adds nothing). On the default stream; throws Error on failure.
void cublas_gemm_int8(int32_t* C, const int8_t* A, const int8_t* B, int M, int N, int K);

// How cublas_gemm multiplies fp32 matrices: pure fp32 (CUBLAS_COMPUTE_32F), or on tensor
// cores with the inputs rounded to TF32 or to BF16 (CUBLAS_COMPUTE_32F_FAST_TF32 and
// _FAST_16BF, compute capability 8.0), fp32 accumulate either way.
enum class CublasMath { fp32, tf32, bf16 };

// The MatmulFn contract (kernels/cuda/device.h) with cuBLAS: C (M,N) = op(A) . op(B) + bias,
// or C += that. cublasGemmEx makes the product (beta = 1 when accumulating), then
// cublasSger adds the bias as the rank-1 update ones (M) . bias (N)^T: `ones` is M device
// floats of 1.0, needed only with a bias. On the default stream; throws Error on failure.
void cublas_gemm(float* C, const float* A, const float* B, int M, int N, int K, const MatmulArgs& args,
                 const float* ones, CublasMath math);

// The FLOP rate cublas_gemm reaches with `math` on a square n^3 product of random numbers
// (the best of 3 timed runs after a warm-up): the practical peak of this GPU at that
// precision, which the GPT trainer's MFU is measured against when the program installs it
// (tensor_core_peak below). 0 when cuBLAS cannot run; *what says what was measured, or why not.
double cublas_peak_flops(Device& dev, CublasMath math, int n, std::string* what);

// gpt::TensorCorePeakFn (gpt/backend_cuda.h) with cuBLAS: precision "tf32" or "bf16" at 4096^3.
double tensor_core_peak(Device& dev, const std::string& precision, std::string* what);

}  // namespace kernels::cuda::bench
