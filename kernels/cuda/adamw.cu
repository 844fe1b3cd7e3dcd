// kernels/cuda/adamw.cu: one AdamW step over a flat buffer of n parameters, PyTorch's
// torch.optim.AdamW formula (as gpt/backend.h and exercise 14; t counts from 1):
//
//   p *= 1 - lr * wd                                  (decoupled weight decay)
//   m = b1 m + (1 - b1) g;   v = b2 v + (1 - b2) g^2   (running means of g and g^2)
//   p -= (lr / (1 - b1^t)) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)
//
// A pure streaming op: per parameter it reads p, m, v, g and writes p, m, v, 28 bytes, for
// ~13 FLOPs. Both versions move exactly those bytes; what changes is the work per byte.
//   v1 thread per param  one thread per parameter, plain 4-byte loads, and both bias
//                        corrections 1 - b^t recomputed by every thread with powf (two
//                        transcendental calls per parameter for two numbers that are the same
//                        for the whole step).
//   v2 fused float4      bias corrections computed once on the host (in double, as the CPU
//                        backend does), 16-byte loads and stores of p, m, v, g (a quarter of the
//                        memory instructions), a grid-stride loop over a grid of about one wave,
//                        and a scalar tail for n % 4. Pointers not all 16-byte aligned (a slice at
//                        an odd offset of a flat buffer) take a scalar grid-stride loop instead.
// Whether v1's powf shows at all (it may hide under the memory time): not yet measured on a GPU.
//
// Oldest GPU: compute capability 5.0 for both versions (NNLAB_SM_MAXWELL: fp32 arithmetic,
// powf, float4 loads), compile-checked for 5.0, 5.2 and 5.3 (scripts/check_old_gpus.py).
#include "kernels/cuda/cuda.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/ops.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace kernels::cuda::NNLAB_CUDA_NS {

namespace {

constexpr int kBlock = 256;

// ---- v1: one thread per parameter, bias corrections per thread ------------------------------

__global__ void adamw_v1_kernel(float* params, float* m, float* v, const float* grads, size_t n, AdamWArgs args) {
  const size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  // m and v start at 0, so after t steps they carry only (1 - b^t) of their weight: divide it out.
  const float bias_correction1 = 1.0f - powf(args.beta1, static_cast<float>(args.t));
  const float bias_correction2 = 1.0f - powf(args.beta2, static_cast<float>(args.t));
  const float g = grads[i];
  float p = params[i];
  p *= 1.0f - args.lr * args.weight_decay;
  const float mi = args.beta1 * m[i] + (1.0f - args.beta1) * g;
  const float vi = args.beta2 * v[i] + (1.0f - args.beta2) * g * g;
  const float denom = sqrtf(vi) / sqrtf(bias_correction2) + args.eps;
  p -= (args.lr / bias_correction1) * mi / denom;
  params[i] = p;
  m[i] = mi;
  v[i] = vi;
}

// ---- v2: host-side bias corrections, float4, grid-stride --------------------------------------

// What one step needs per parameter, with everything that depends on t alone folded in.
struct AdamWStep {
  float decay;      // 1 - lr * wd
  float beta1, beta2, eps;
  float step_size;  // lr / (1 - b1^t)
  float bc2_sqrt;   // sqrt(1 - b2^t)
};

__device__ __forceinline__ void adamw_update(float& p, float& m, float& v, float g, const AdamWStep& s) {
  p *= s.decay;
  m = s.beta1 * m + (1.0f - s.beta1) * g;
  v = s.beta2 * v + (1.0f - s.beta2) * g * g;
  p -= s.step_size * m / (sqrtf(v) / s.bc2_sqrt + s.eps);
}

// Parameters 4i .. 4i+3 per float4 i (all four pointers 16-byte aligned: the launcher checked),
// then the n % 4 left over, one per thread of the first threads of the grid.
__global__ void __launch_bounds__(kBlock)
    adamw_v2_kernel(float* params, float* m, float* v, const float* grads, size_t n, AdamWStep s) {
  const size_t first = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  const size_t n4 = n / 4;
  float4* p4 = reinterpret_cast<float4*>(params);
  float4* m4 = reinterpret_cast<float4*>(m);
  float4* v4 = reinterpret_cast<float4*>(v);
  const float4* g4 = reinterpret_cast<const float4*>(grads);
  for (size_t i = first; i < n4; i += stride) {
    float4 p = p4[i];
    float4 mm = m4[i];
    float4 vv = v4[i];
    const float4 g = g4[i];
    adamw_update(p.x, mm.x, vv.x, g.x, s);
    adamw_update(p.y, mm.y, vv.y, g.y, s);
    adamw_update(p.z, mm.z, vv.z, g.z, s);
    adamw_update(p.w, mm.w, vv.w, g.w, s);
    p4[i] = p;
    m4[i] = mm;
    v4[i] = vv;
  }
  const size_t tail = 4 * n4 + first;  // the scalar tail: at most 3 parameters
  if (tail < n) adamw_update(params[tail], m[tail], v[tail], grads[tail], s);
}

// The same update for pointers that are not 16-byte aligned: one float at a time.
__global__ void __launch_bounds__(kBlock)
    adamw_v2_scalar_kernel(float* params, float* m, float* v, const float* grads, size_t n, AdamWStep s) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    adamw_update(params[i], m[i], v[i], grads[i], s);
  }
}

}  // namespace

void adamw_v1(float* params, float* m, float* v, const float* grads, size_t n, AdamWArgs args) {
  if (n == 0) return;
  const size_t blocks = (n + kBlock - 1) / kBlock;
  launch("adamw_v1_kernel", adamw_v1_kernel, dim3(static_cast<unsigned>(blocks)), dim3(kBlock), 0, params, m, v,
         grads, n, args);
}

void adamw_v2(float* params, float* m, float* v, const float* grads, size_t n, AdamWArgs args) {
  if (n == 0) return;
  // The bias corrections once per step, in double (as gpt/backend_cpu.cpp), rounded to float.
  const double t = static_cast<double>(args.t);
  AdamWStep s;
  s.decay = 1.0f - args.lr * args.weight_decay;
  s.beta1 = args.beta1;
  s.beta2 = args.beta2;
  s.eps = args.eps;
  s.step_size = static_cast<float>(args.lr / (1.0 - std::pow(static_cast<double>(args.beta1), t)));
  s.bc2_sqrt = static_cast<float>(std::sqrt(1.0 - std::pow(static_cast<double>(args.beta2), t)));
  const bool vector = aligned16(params) && aligned16(m) && aligned16(v) && aligned16(grads);
  // A grid of about one wave (2048 resident threads per SM), fewer blocks when n is small;
  // each thread then strides over the buffer.
  const size_t items = vector ? n / 4 + 1 : n;  // float4s (+1: the tail's threads) or floats
  const size_t wanted = (items + kBlock - 1) / kBlock;
  const size_t wave = static_cast<size_t>(multiprocessors()) * (2048 / kBlock);
  const dim3 grid(static_cast<unsigned>(std::min(wanted, wave)));
  if (vector) {
    launch("adamw_v2_kernel", adamw_v2_kernel, grid, dim3(kBlock), 0, params, m, v, grads, n, s);
  } else {
    launch("adamw_v2_scalar_kernel", adamw_v2_scalar_kernel, grid, dim3(kBlock), 0, params, m, v, grads, n, s);
  }
}

void add_adamw(Kernels& k) {
  k.adamw = {
      {1, "thread per param", "plain loads, bias corrections recomputed with powf by every thread",
        adamw_v1, {NNLAB_SM_MAXWELL}},
      {2, "fused float4", "bias corrections once on the host, float4 loads/stores, grid-stride loop",
        adamw_v2, {NNLAB_SM_MAXWELL}},
  };
}

}  // namespace kernels::cuda::NNLAB_CUDA_NS
