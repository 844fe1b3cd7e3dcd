// kernels/cuda/bench/cublas_none.cpp: the cuBLAS peer in builds without nvcc: never
// available (kernels/cuda/bench/cublas.h).
#include "kernels/cuda/bench/cublas.h"

namespace kernels::cuda::bench {

bool cublas_available(Device& /*dev*/, std::string* why) {
  if (why) *why = "built without nvcc";
  return false;
}

void cublas_sgemm(float*, const float*, const float*, int, int, int, bool) {
  throw Error("cuBLAS: built without nvcc");
}

void cublas_gemm(float*, const float*, const float*, int, int, int, const MatmulArgs&, const float*, CublasMath) {
  throw Error("cuBLAS: built without nvcc");
}

void cublas_gemm_int8(int32_t*, const int8_t*, const int8_t*, int, int, int) {
  throw Error("cuBLAS: built without nvcc");
}

}  // namespace kernels::cuda::bench
