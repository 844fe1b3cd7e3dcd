// kernels/cuda/common.cuh: the small pieces several kernel files share (include after
// kernels/cuda/cuda.h, inside nothing: it opens the build's namespace itself).
//
//   aligned16, device_props, multiprocessors, grid_stride_blocks   host-side launch helpers
//   warp_sum                                                       a butterfly sum over 32 lanes
//   online_add, online_merge, warp_merge, block_merge              the online softmax's
//                                                                  (max, sum) pair
//   stage_kv_tile, online_softmax_tile                             a flash attention's key
//                                                                  tile: staged, then added
#pragma once

#include <algorithm>
#include <cfloat>
#include <cstdint>

#include "kernels/cuda/cuda.h"

namespace kernels::cuda::NNLAB_CUDA_NS {

// ---- host side ----------------------------------------------------------------------------

// float4 loads and stores need 16-byte aligned addresses.
inline bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// The device's properties, asked for once: cudaGetDeviceProperties is slow next to a launch.
inline const cudaDeviceProp& device_props() {
  static const cudaDeviceProp props = [] {
    int device = 0;
    check(cudaGetDevice(&device), "cudaGetDevice");
    cudaDeviceProp p{};
    check(cudaGetDeviceProperties(&p, device), "cudaGetDeviceProperties");
    return p;
  }();
  return props;
}

inline int multiprocessors() { return device_props().multiProcessorCount; }

// Blocks for a grid-stride loop over `items`: no more than the device keeps resident at once
// (multiprocessors x threads per multiprocessor / block), so each thread loops instead of a
// new block starting; fewer when there is less work.
inline int grid_stride_blocks(int items, int block) {
  const cudaDeviceProp& p = device_props();
  const int resident = p.multiProcessorCount * std::max(1, p.maxThreadsPerMultiProcessor / block);
  return std::max(1, std::min(ceil_div(items, block), resident));
}

// ---- warp reductions ------------------------------------------------------------------------

// Every lane ends with the sum of the 32 lanes' v (xor butterfly: after the exchanges at
// distance 16, 8, 4, 2, 1 each lane has seen all 32).
__device__ __forceinline__ float warp_sum(float v) {
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

// ---- the online softmax's (max, sum) pair ----------------------------------------------------
// (m, s) summarises the elements seen so far: m their max, s = sum_k exp(x_k - m).
// The max of no elements is -FLT_MAX rather than -INFINITY: merging two empty pairs computes
// m - max(m, m) = 0 (exp 1, times s = 0), where -INFINITY would give -inf - (-inf) = NaN.

// Adds one element x to (m, s). When x is a new max, the old sum was relative to the old
// max: s exp(m - x) re-bases it (exp(a - m) exp(m - x) = exp(a - x)), and x adds exp(0) = 1.
__device__ __forceinline__ void online_add(float& m, float& s, float x) {
  if (x > m) {
    s = s * expf(m - x) + 1.0f;
    m = x;
  } else {
    s += expf(x - m);
  }
}

// (m, s) = the union of (m, s) and (m2, s2), both re-based to the larger max.
__device__ __forceinline__ void online_merge(float& m, float& s, float m2, float s2) {
  const float mm = fmaxf(m, m2);
  s = s * expf(m - mm) + s2 * expf(m2 - mm);
  m = mm;
}

// Merges the pairs of the 32 lanes of a warp; every lane ends with the warp's pair.
__device__ __forceinline__ void warp_merge(float& m, float& s) {
  for (int offset = 16; offset > 0; offset /= 2) {
    const float m2 = __shfl_xor_sync(0xffffffffu, m, offset);
    const float s2 = __shfl_xor_sync(0xffffffffu, s, offset);
    online_merge(m, s, m2, s2);
  }
}

// Merges the pairs of every thread of the block (blockDim.x a multiple of 32, at most 1024);
// every thread ends with the block's pair. Call once per kernel (the shared arrays are not
// guarded against a second call overwriting them while slow warps still read).
__device__ __forceinline__ void block_merge(float& m, float& s) {
  __shared__ float warp_m[32];
  __shared__ float warp_s[32];
  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int warps = static_cast<int>(blockDim.x) / 32;
  warp_merge(m, s);
  if (lane == 0) {
    warp_m[warp] = m;
    warp_s[warp] = s;
  }
  __syncthreads();
  // Every warp merges the (at most 32) per-warp pairs itself: cheaper than a second
  // barrier for one warp to broadcast them.
  m = lane < warps ? warp_m[lane] : -FLT_MAX;
  s = lane < warps ? warp_s[lane] : 0.0f;
  warp_merge(m, s);
}

// ---- flash attention's key tiles ------------------------------------------------------------
// attention.cu's fused forward (v3) and flash_attention.cu's forward and backward walk the keys
// in tiles of KBC staged in shared memory, each thread of the block owning one query.

// Stages keys k0 .. k0+KBC-1 of one head's k and v into the shared tiles Ks, Vs (KBC, HS): the
// block's nthreads threads load consecutive channels; rows past T and channels past hs are 0.
// kbase, vbase: the head's k_0 and v_0; ld: floats from one position to the next.
template <int KBC, int HS>
__device__ __forceinline__ void stage_kv_tile(float (*Ks)[HS], float (*Vs)[HS], const float* kbase,
                                              const float* vbase, size_t ld, int k0, int T, int hs,
                                              int nthreads) {
  for (int i = static_cast<int>(threadIdx.x); i < KBC * HS; i += nthreads) {
    const int j = i / HS;  // key within the tile
    const int d = i % HS;  // channel
    const bool in = k0 + j < T && d < hs;
    const size_t at = static_cast<size_t>(k0 + j) * ld + d;
    Ks[j][d] = in ? kbase[at] : 0.0f;
    Vs[j][d] = in ? vbase[at] : 0.0f;
  }
}

// Adds one staged key tile to one query's online softmax: s_j = q . k_j (q already scaled) for
// the tile's first `valid` keys (the causal mask: the others are not used); the running max m,
// sum l = sum exp(s - m) and unnormalised output o = sum exp(s - m) v are re-based to the new
// max (exp(-FLT_MAX - m_new) = 0 the first time), then the tile's terms are added.
template <int KBC, int HS>
__device__ __forceinline__ void online_softmax_tile(const float (&q)[HS], const float (*Ks)[HS],
                                                    const float (*Vs)[HS], int valid, float& m, float& l,
                                                    float (&o)[HS]) {
  float s[KBC];
  float tile_max = -FLT_MAX;
#pragma unroll
  for (int j = 0; j < KBC; ++j) {
    float dot = 0.0f;
#pragma unroll
    for (int d = 0; d < HS; ++d) dot += q[d] * Ks[j][d];
    s[j] = dot;
    if (j < valid) tile_max = fmaxf(tile_max, dot);
  }
  const float m_new = fmaxf(m, tile_max);
  const float correction = expf(m - m_new);
  l *= correction;
#pragma unroll
  for (int d = 0; d < HS; ++d) o[d] *= correction;
#pragma unroll
  for (int j = 0; j < KBC; ++j) {
    const float p = j < valid ? expf(s[j] - m_new) : 0.0f;
    l += p;
#pragma unroll
    for (int d = 0; d < HS; ++d) o[d] += p * Vs[j][d];
  }
  m = m_new;
}

}  // namespace kernels::cuda::NNLAB_CUDA_NS
