// kernels/cuda/elementwise.cu: element-wise ops, where every byte is read once and written
// once and arithmetic is nearly free: the time is memory traffic, and fusing kernels is the
// only lever that matters.
//
// cos2: out = cos(cos(in)), the fusion demo of lesson 09
//   v1 two-kernels  cos into out, then cos of out into out: 4 memory trips (read in, write
//                   out, read out, write out)
//   v2 fused        one kernel computes cos(cos(x)) in a register: 2 trips, twice as fast
//                   when memory-bound
// (gelu and bias + gelu: see below)
#include "kernels/cuda/cuda.h"
#include "kernels/cuda/ops.h"

namespace kernels::cuda::NNLAB_CUDA_NS {

// ---- cos2 ---------------------------------------------------------------------------------

// One thread per element; a grid-stride loop would also do, one element per thread is the
// plain version students write first.
__global__ void cos_kernel(float* out, const float* in, int n) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) out[i] = cosf(in[i]);
}

__global__ void cos2_fused_kernel(float* out, const float* in, int n) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) out[i] = cosf(cosf(in[i]));
}

void cos2_v1(float* out, const float* in, int n) {
  const int block = 256;
  launch("cos_kernel", cos_kernel, dim3(ceil_div(n, block)), dim3(block), 0, out, in, n);
  launch("cos_kernel", cos_kernel, dim3(ceil_div(n, block)), dim3(block), 0, out, out, n);
}

void cos2_v2(float* out, const float* in, int n) {
  const int block = 256;
  launch("cos2_fused_kernel", cos2_fused_kernel, dim3(ceil_div(n, block)), dim3(block), 0, out, in, n);
}

void add_elementwise(Kernels& k) {
  k.cos2 = {
      {{"v1", "two kernels", "cos, then cos again through memory: 4 trips per element", 50}, cos2_v1},
      {{"v2", "fused", "cos(cos(x)) in a register: 2 trips per element", 50}, cos2_v2},
  };
}

}  // namespace kernels::cuda::NNLAB_CUDA_NS
