// kernels/cuda/ceilings.cu: not an op, a ceiling. The FP32 FLOP/s this GPU reaches when it
// does nothing but fused multiply-adds, measured by the GPU harness (kernels/cuda/bench/run.h:
// measure_ceilings) in the same run as the kernels it judges, as kernels/ceilings.cpp
// measures the CPU's.
//
// Why it reaches the peak: an SM issues one FFMA per scheduler per cycle, and a dependent
// FFMA waits ~4 cycles for the previous result. Each thread runs kChains independent chains,
// and the launch fills every SM with warps (the caller asks for 8 blocks of 256 threads per
// SM), so every scheduler always has an FFMA ready. The chains converge (a -> c / (1 - b) =
// 1) so no value overflows, and each thread writes its sum, so nothing can be optimised away.
// FLOPs counted: 2 per FMA. (Not yet measured on a GPU.)
//
// Oldest GPU: compute capability 5.0 (fp32 FMAs only), compile-checked for 5.0, 5.2 and 5.3
// (scripts/check_old_gpus.py).
#include "kernels/cuda/cuda.h"
#include "kernels/cuda/ops.h"

namespace kernels::cuda::NNLAB_CUDA_NS {

namespace {

constexpr int kChains = 8;

// out (blocks * threads): one float per thread, the sum of its chains.
__global__ void fma_peak_kernel(float* out, int iters, float b, float c) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  float a[kChains];
#pragma unroll
  for (int k = 0; k < kChains; ++k) a[k] = static_cast<float>(threadIdx.x + static_cast<unsigned>(k)) * 1e-3f;
  for (int it = 0; it < iters; ++it) {
#pragma unroll
    for (int k = 0; k < kChains; ++k) a[k] = fmaf(a[k], b, c);  // a = a b + c: 2 FLOPs
  }
  float sum = 0.0f;
#pragma unroll
  for (int k = 0; k < kChains; ++k) sum += a[k];
  out[i] = sum;
}

double fma_peak(float* out, int blocks, int threads, int iters) {
  // b and c are arguments, not constants, so the compiler cannot fold the chains.
  launch("fma_peak_kernel", fma_peak_kernel, dim3(static_cast<unsigned>(blocks)), dim3(static_cast<unsigned>(threads)),
         0, out, iters, 0.999f, 1e-3f);
  return 2.0 * kChains * static_cast<double>(iters) * static_cast<double>(blocks) * static_cast<double>(threads);
}

}  // namespace

void add_ceilings(Kernels& k) { k.fma_peak = fma_peak; }

}  // namespace kernels::cuda::NNLAB_CUDA_NS
