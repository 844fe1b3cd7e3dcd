// kernels/cuda/elementwise.cu: element-wise ops, where every byte is read once and written
// once and arithmetic is nearly free: the time is memory traffic, and fusing kernels is the
// only lever that matters.
//
// cos2: out = cos(cos(in)), the fusion demo of lesson 09
//   v1 two-kernels  cos into out, then cos of out into out: 4 memory trips (read in, write
//                   out, read out, write out)
//   v2 fused        one kernel computes cos(cos(x)) in a register: 2 trips, twice as fast
//                   when memory-bound
//
// gelu: out = gelu(in), the tanh approximation GPT-2 uses (the CPU's kernels/bias_gelu.h and
// nn/transformer.h compute the same function),
//   gelu(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
//   v1 thread-per-element  one element per thread, as cos2: 4-byte loads and stores, and a
//                          thread (index arithmetic, bounds check) per element
//   v2 float4-grid-stride  16-byte loads and stores (a quarter of the memory instructions)
//                          and a grid that fills the GPU once, each thread striding over
//                          the array; a scalar tail for n % 4, and v1's kernel when a
//                          pointer is not 16-byte aligned
//
// bias + gelu: out (rows, cols) = gelu(inp + bias[col]), the epilogue of the MLP's first
// matmul (bytes per element: reads + writes; bias read once, cols floats):
//   v1 unfused         a bias-add kernel writes inp + bias into out, then v1's gelu kernel
//                      runs in place on out: 4 trips per element (16 B)
//   v2 fused           one kernel, the sum stays in a register: 2 trips (8 B). Attacks the
//                      pre-activation's round trip, as cos2 v2 does
//   v3 fused-float4    v2 with float4 loads and stores and a grid-stride loop; needs
//                      cols % 4 == 0 and 16-byte aligned pointers (a float4 then never
//                      straddles two rows), else it runs v2's kernel
// Figures: not yet measured on a GPU.
//
// Oldest GPU: compute capability 5.0 for every version (NNLAB_SM_MAXWELL: fp32 arithmetic and
// float4 loads), compile-checked for 5.0, 5.2 and 5.3 (scripts/check_old_gpus.py).
#include <algorithm>
#include <climits>
#include <cstdint>
#include <string>

#include "kernels/cuda/cuda.h"
#include "kernels/cuda/common.cuh"
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

// ---- shared by gelu and bias + gelu ---------------------------------------------------------

namespace {

// gelu(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))); sqrt(2/pi) = 0.7978845608...
// tanhf is CUDA's accurate one (2 ulp), not a fast-math approximation: the kernels stay
// memory-bound either way, and this keeps every version within a few ulp of the reference.
__device__ __forceinline__ float gelu_tanh(float x) {
  const float u = 0.7978845608f * (x + 0.044715f * x * x * x);
  return 0.5f * x * (1.0f + tanhf(u));
}

void require_int_count(const char* op, long long n) {
  if (n > INT_MAX) {
    throw Error(std::string(op) + ": " + std::to_string(n) +
                " elements; its kernels index them with an int (at most 2^31 - 1)");
  }
}

// ---- gelu ---------------------------------------------------------------------------------

__global__ void gelu_kernel(float* out, const float* in, int n) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) out[i] = gelu_tanh(in[i]);
}

// in, out 16-byte aligned. float4 i is elements 4i .. 4i+3; the last n % 4 (< 4) elements
// are the tail, one each for the first threads of the grid.
__global__ void gelu_float4_kernel(float* out, const float* in, int n) {
  const int stride = static_cast<int>(gridDim.x * blockDim.x);
  const int first = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  const int n4 = n / 4;
  const float4* in4 = reinterpret_cast<const float4*>(in);  // (n/4) float4
  float4* out4 = reinterpret_cast<float4*>(out);
  for (int i = first; i < n4; i += stride) {
    const float4 v = in4[i];
    out4[i] = make_float4(gelu_tanh(v.x), gelu_tanh(v.y), gelu_tanh(v.z), gelu_tanh(v.w));
  }
  if (first < n - 4 * n4) out[4 * n4 + first] = gelu_tanh(in[4 * n4 + first]);
}

}  // namespace

void gelu_v1(float* out, const float* in, int n) {
  if (n <= 0) return;
  const int block = 256;
  launch("gelu_kernel", gelu_kernel, dim3(ceil_div(n, block)), dim3(block), 0, out, in, n);
}

void gelu_v2(float* out, const float* in, int n) {
  if (n <= 0) return;
  const int block = 256;
  if (!aligned16(in) || !aligned16(out)) {
    launch("gelu_kernel", gelu_kernel, dim3(ceil_div(n, block)), dim3(block), 0, out, in, n);
    return;
  }
  // One thread per float4 at most (plus the tail, which the first threads also cover).
  launch("gelu_float4_kernel", gelu_float4_kernel, dim3(grid_stride_blocks(std::max(n / 4, 1), block)),
         dim3(block), 0, out, in, n);
}

// ---- bias + gelu --------------------------------------------------------------------------

namespace {

// out = inp + bias[col], one thread per element of (rows, cols).
__global__ void bias_add_kernel(float* out, const float* inp, const float* bias, int rows, int cols) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < rows * cols) out[i] = inp[i] + bias[i % cols];
}

// out = gelu(inp + bias[col]), one thread per element.
__global__ void bias_gelu_kernel(float* out, const float* inp, const float* bias, int rows, int cols) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < rows * cols) out[i] = gelu_tanh(inp[i] + bias[i % cols]);
}

// cols % 4 == 0 and every pointer 16-byte aligned: float4 i of the (rows, cols/4) float4
// matrix is row i / (cols/4), columns 4c .. 4c+3 with c = i % (cols/4), and bias4[c] holds
// their four biases.
__global__ void bias_gelu_float4_kernel(float* out, const float* inp, const float* bias, int rows, int cols) {
  const int cols4 = cols / 4;
  const int n4 = rows * cols4;
  const int stride = static_cast<int>(gridDim.x * blockDim.x);
  const float4* inp4 = reinterpret_cast<const float4*>(inp);  // (rows, cols/4) float4
  const float4* bias4 = reinterpret_cast<const float4*>(bias);  // (cols/4) float4
  float4* out4 = reinterpret_cast<float4*>(out);
  for (int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x); i < n4; i += stride) {
    const float4 v = inp4[i];
    const float4 b = bias4[i % cols4];
    out4[i] = make_float4(gelu_tanh(v.x + b.x), gelu_tanh(v.y + b.y), gelu_tanh(v.z + b.z), gelu_tanh(v.w + b.w));
  }
}

}  // namespace

void bias_gelu_v1(float* out, const float* inp, const float* bias, int rows, int cols) {
  if (rows <= 0 || cols <= 0) return;
  require_int_count("bias_gelu v1", static_cast<long long>(rows) * cols);
  const int n = rows * cols;
  const int block = 256;
  launch("bias_add_kernel", bias_add_kernel, dim3(ceil_div(n, block)), dim3(block), 0, out, inp, bias, rows, cols);
  launch("gelu_kernel", gelu_kernel, dim3(ceil_div(n, block)), dim3(block), 0, out, out, n);
}

void bias_gelu_v2(float* out, const float* inp, const float* bias, int rows, int cols) {
  if (rows <= 0 || cols <= 0) return;
  require_int_count("bias_gelu v2", static_cast<long long>(rows) * cols);
  const int n = rows * cols;
  const int block = 256;
  launch("bias_gelu_kernel", bias_gelu_kernel, dim3(ceil_div(n, block)), dim3(block), 0, out, inp, bias, rows,
         cols);
}

void bias_gelu_v3(float* out, const float* inp, const float* bias, int rows, int cols) {
  if (rows <= 0 || cols <= 0) return;
  if (cols % 4 != 0 || !aligned16(out) || !aligned16(inp) || !aligned16(bias)) {
    bias_gelu_v2(out, inp, bias, rows, cols);
    return;
  }
  require_int_count("bias_gelu v3", static_cast<long long>(rows) * cols);
  const int block = 256;
  launch("bias_gelu_float4_kernel", bias_gelu_float4_kernel, dim3(grid_stride_blocks(rows * (cols / 4), block)),
         dim3(block), 0, out, inp, bias, rows, cols);
}

void add_elementwise(Kernels& k) {
  k.cos2 = {
      {1, "two kernels", "cos, then cos again through memory: 4 trips per element", cos2_v1, {NNLAB_SM_MAXWELL}},
      {2, "fused", "cos(cos(x)) in a register: 2 trips per element", cos2_v2, {NNLAB_SM_MAXWELL}},
  };
  k.gelu = {
      {1, "thread-per-element", "one element per thread, 4-byte loads and stores", gelu_v1, {NNLAB_SM_MAXWELL}},
      {2, "float4-grid-stride", "16-byte loads and stores, one resident grid striding over the array",
        gelu_v2, {NNLAB_SM_MAXWELL}},
  };
  k.bias_gelu = {
      {1, "unfused", "bias-add kernel, then gelu in place: 4 trips per element", bias_gelu_v1, {NNLAB_SM_MAXWELL}},
      {2, "fused", "gelu(x + b) in a register: 2 trips per element", bias_gelu_v2, {NNLAB_SM_MAXWELL}},
      {3, "fused-float4", "v2 with float4 and a grid-stride loop (cols % 4 == 0, aligned; else v2)",
        bias_gelu_v3, {NNLAB_SM_MAXWELL}},
  };
}

}  // namespace kernels::cuda::NNLAB_CUDA_NS
