// kernels/cuda/decode.cu: the inference ops of lesson 10 (kernels/cuda/device.h: MatvecFn,
// AttentionDecodeFn), each with numbered versions validated against the host reference
// (kernels/decode.h: matvec_v1, attention_decode_v1; kernels/cuda/bench/decode.cpp).
//
// matvec: y (n, rows) = x (n, cols) W^T + bias, W packed in any kernels::WeightFormat
// (kernels/weight_format.h), dequantised on the fly. n is small (1 to a few), so the op is
// all about reading W's bytes once, as fast as memory gives them.
//   v1 naive            one thread per (input row b, output row r) walks row r of W,
//                       dequantising one weight at a time (the host reference's loop).
//                       Neighbouring threads read weights `cols` apart (uncoalesced), and
//                       the n threads of one output row each read the whole row again.
//   v2 warp per row     one warp per output row; each lane loads 16 bytes of the row at a
//                       time (consecutive lanes: consecutive 16 bytes, so a warp reads 512
//                       contiguous bytes per step), dequantises them in registers
//                       (fp32: 4 weights; bf16: 8, a 16-bit shift each; int8: 16, widened,
//                       the row's scale applied once to the sum; int4: 32 = one group,
//                       nibble - 8, the group's scale applied to the group's partial sum;
//                       2:4: 8 columns from 4 kept values and one index byte, the 2-bit
//                       positions selecting which x's they meet) and uses each weight for
//                       up to 8 input rows, so W is read once per call for n <= 8 (once per
//                       8 rows beyond). x is staged in shared memory a tile of 1024 columns
//                       at a time, float4-swizzled so the lanes' float4 reads hit distinct
//                       banks; warp_sum (common.cuh) adds the 32 lanes' partial sums.
//                       Rows whose bytes are not a multiple of 16 (or data not 16-byte
//                       aligned) take a scalar path: lanes stride the row one weight each.
// w8a8 (int8 weights AND activations, lesson 15: kernels/weight_format.h) is integer
// arithmetic in both versions: a small kernel first quantises each input row of x to int8
// (one block per row: s_x = max|x| / 127, q = rint(x / s_x) as x * (1 / s_x), clamped to
// [-127, 127]: kernels::quantize_rows_int8's operations, so the same bytes) into a scratch
// buffer the launcher keeps; then v1 sums qx . q in an int32 loop per (b, r), and v2 is a warp
// per row again, each lane taking 16 weight bytes and the 16 matching bytes of each input
// row as four words and adding them with __dp4a (4 byte products and an add per instruction;
// compute capability 6.1: older GPUs take four multiply-adds instead, the same result), the
// lanes' int32 sums added across the warp. Integer sums are exact in any order, so every
// version's sums equal the CPU's bit for bit; y = s_x s_w sum + bias is then rounded once
// per operation (no FMA), as the CPU's.
//
// attention_decode: append the n new k, v rows to the caches, then each new query attends
// over positions 0 .. pos+i. Grouped-query heads (kernels/decode.h): qkv rows are
// [q (C) | k (KV) | v (KV)], KV = NKV * hs, the caches (B, maxT, KV), query head h reads KV
// head h / (NH / NKV); NKV = NH is the multi-head layout, the same arithmetic as before.
//   v1 naive            an append kernel (one thread per new float of k and v), then one
//                       thread per (b, i, h): pass 1 the max score, pass 2 the exponentials'
//                       sum and the weighted sum of v accumulated in out, pass 3 out /= sum.
//                       Scores are recomputed in pass 2 (nothing stored).
//   v2 warp per head    one launch: one warp per (b, i, h). It writes its own head's slice
//                       of the new k, v rows (the slices of all warps tile the new rows) and
//                       reads positions >= pos from qkv itself, so no warp waits for another.
//                       Positions go in chunks of 256: lanes over positions compute scores
//                       into shared memory and an online softmax (max, sum) per lane, merged
//                       across the warp (warp_merge) and into the running pair
//                       (online_merge); the running output (lanes over the head dimension,
//                       coalesced v reads) is rescaled by exp(old max - new max), then the
//                       chunk's exp(score - max) v added. Shared memory is O(chunk + hs) per
//                       warp whatever the cache length. No atomics: deterministic. With
//                       grouped heads the warp of the first query head of each group
//                       appends the group's KV slice (the others read those positions
//                       from qkv, as every warp does).
// Figures: not yet measured on a GPU.
//
// Oldest GPU: compute capability 5.0 for every version of both ops (NNLAB_SM_MAXWELL: shared
// memory, _sync shuffles, __syncwarp; bf16 weights are widened with an integer shift, no bf16
// hardware), compile-checked for 5.0, 5.2 and 5.3 (scripts/check_old_gpus.py).
#include <algorithm>
#include <cfloat>
#include <climits>
#include <cstdint>
#include <string>
#include <stdexcept>

#include "kernels/cuda/cuda.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/ops.h"

namespace kernels::cuda::NNLAB_CUDA_NS {

namespace {

using kernels::WeightFormat;
using kernels::WeightsView;

// ---- dequantising one weight (v1, and v2's scalar path): kernels/decode.cpp's weight_at ----

__device__ __forceinline__ float bf16_bits_to_float(unsigned bits16) { return __uint_as_float(bits16 << 16); }

__device__ __forceinline__ float weight_at(const WeightsView& w, int r, int c) {
  const size_t i = static_cast<size_t>(r) * static_cast<size_t>(w.cols) + static_cast<size_t>(c);
  switch (w.format) {
    case WeightFormat::f32: return static_cast<const float*>(w.data)[i];
    case WeightFormat::bf16: return bf16_bits_to_float(static_cast<const uint16_t*>(w.data)[i]);
    case WeightFormat::int8:
    case WeightFormat::w8a8:  // int8's storage (unused: the launchers send w8a8 to its integer kernels)
      return w.scales[r] * static_cast<float>(static_cast<const int8_t*>(w.data)[i]);
    case WeightFormat::int4: {
      const unsigned byte = static_cast<const uint8_t*>(w.data)[i / 2];
      const int q = static_cast<int>((c & 1) ? (byte >> 4) : (byte & 0xFu)) - 8;
      return w.scales[i / kInt4Group] * static_cast<float>(q);
    }
    case WeightFormat::sparse24: {
      const size_t g = i / 4;  // the group of 4 columns
      const unsigned idx = w.index[g / 2];
      const unsigned nib = (g & 1) ? (idx >> 4) : (idx & 0xFu);
      const int p0 = static_cast<int>(nib & 3u), p1 = static_cast<int>((nib >> 2) & 3u), p = c & 3;
      const float* vals = static_cast<const float*>(w.data) + g * 2;
      return p == p0 ? vals[0] : p == p1 ? vals[1] : 0.0f;
    }
  }
  return 0.0f;
}

// ---- matvec v1 ---------------------------------------------------------------------------------

constexpr int kBlock = 256;

// Thread (b, r): y[b, r] = bias[r] + sum_c W[r, c] x[b, c], in column order (the reference's).
__global__ void matvec_v1_kernel(float* y, const float* x, WeightsView w, const float* bias, int n) {
  const size_t item = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;  // b * rows + r
  if (item >= static_cast<size_t>(n) * static_cast<size_t>(w.rows)) return;
  const int b = static_cast<int>(item / static_cast<size_t>(w.rows));
  const int r = static_cast<int>(item % static_cast<size_t>(w.rows));
  const float* xb = x + static_cast<size_t>(b) * static_cast<size_t>(w.cols);
  float acc = bias != nullptr ? bias[r] : 0.0f;
  for (int c = 0; c < w.cols; ++c) acc += weight_at(w, r, c) * xb[c];
  y[item] = acc;
}

// ---- matvec v2 ---------------------------------------------------------------------------------

constexpr int kRowWarps = 8;                // warps (= output rows) per block
constexpr int kRowBlock = kRowWarps * 32;   // 256 threads
constexpr int kTile = 1024;                 // columns of x staged per round
constexpr int kMaxN = 8;                    // input rows per pass: accumulators per lane

// Columns one 16-byte load holds, per format.
template <WeightFormat F>
constexpr int cols_per_load() {
  return F == WeightFormat::f32 ? 4 : F == WeightFormat::bf16 ? 8 : F == WeightFormat::int8 ? 16
                                  : F == WeightFormat::int4   ? 32
                                                              : 8;  // sparse24: 4 kept floats = 8 columns
}

// Byte offset of column c of row r in the data array (c a multiple of cols_per_load).
template <WeightFormat F>
__device__ __forceinline__ size_t data_offset(size_t rc) {
  return F == WeightFormat::f32 ? rc * 4 : F == WeightFormat::bf16 ? rc * 2 : F == WeightFormat::int8 ? rc
                                     : F == WeightFormat::int4   ? rc / 2
                                                                 : rc * 2;  // sparse24: rc / 2 floats
}

// Where float c of a staged tile row lives: float4 f = c / 4 goes to f ^ ((f / 8) % 8) (only
// the low 3 bits of f change, so a tile row stays a tile row). A lane reading float4s
// lane * k + j (k = 1, 2, 4, 8 float4s per load) then meets 8 consecutive lanes in 8 distinct
// 16-byte bank groups: no bank conflicts for any format.
__device__ __forceinline__ int swizzle4(int f) { return f ^ ((f >> 3) & 7); }
__device__ __forceinline__ int swizzle(int c) { return swizzle4(c >> 2) * 4 + (c & 3); }

__device__ __forceinline__ float component(const float4& v, int p) {
  return p == 0 ? v.x : p == 1 ? v.y : p == 2 ? v.z : v.w;
}

// The 4 floats of word u's 4 int8s, and 8 of its 8 nibbles - 8.
__device__ __forceinline__ float i8(unsigned u, int k) {
  return static_cast<float>(static_cast<int8_t>(static_cast<uint8_t>(u >> (8 * k))));
}
__device__ __forceinline__ float i4(unsigned u, int k) {
  return static_cast<float>(static_cast<int>((u >> (4 * k)) & 0xFu) - 8);
}

// dot of 4 weights with the float4 of x they meet
__device__ __forceinline__ float dot4(float a, float b, float c, float d, const float4& x) {
  return a * x.x + b * x.y + c * x.z + d * x.w;
}

// Lane's share of one 16-byte load: the chunk of row r starting at column col (a multiple of
// cols_per_load, inside the row), against the staged x of nc input rows (xs: (kMaxN, kTile),
// swizzled; tc = col - the tile's first column). Adds to acc[nb].
template <WeightFormat F>
__device__ __forceinline__ void chunk_dot(float (&acc)[kMaxN], const WeightsView& w, int r, int col, int tc,
                                          const float* xs, int nc) {
  const size_t rc = static_cast<size_t>(r) * static_cast<size_t>(w.cols) + static_cast<size_t>(col);
  const uint4 raw = *reinterpret_cast<const uint4*>(static_cast<const uint8_t*>(w.data) + data_offset<F>(rc));
  const float4* x4 = reinterpret_cast<const float4*>(xs);
  const int f0 = tc / 4;  // first float4 of the chunk in the tile row
  const unsigned u[4] = {raw.x, raw.y, raw.z, raw.w};
  if constexpr (F == WeightFormat::f32) {
#pragma unroll
    for (int nb = 0; nb < kMaxN; ++nb) {
      if (nb < nc) {
        const float4 xv = x4[nb * (kTile / 4) + swizzle4(f0)];
        acc[nb] += dot4(__uint_as_float(u[0]), __uint_as_float(u[1]), __uint_as_float(u[2]), __uint_as_float(u[3]), xv);
      }
    }
  } else if constexpr (F == WeightFormat::bf16) {
    // element 2k of a word is its low half (little-endian)
#pragma unroll
    for (int nb = 0; nb < kMaxN; ++nb) {
      if (nb < nc) {
        float s = 0.0f;
#pragma unroll
        for (int j = 0; j < 2; ++j) {
          const float4 xv = x4[nb * (kTile / 4) + swizzle4(f0 + j)];
          s += dot4(bf16_bits_to_float(u[2 * j] & 0xFFFFu), __uint_as_float(u[2 * j] & 0xFFFF0000u),
                    bf16_bits_to_float(u[2 * j + 1] & 0xFFFFu), __uint_as_float(u[2 * j + 1] & 0xFFFF0000u), xv);
        }
        acc[nb] += s;
      }
    }
  } else if constexpr (F == WeightFormat::int8) {
    // the row's scale multiplies the whole sum at the end (matvec_v2_kernel)
#pragma unroll
    for (int nb = 0; nb < kMaxN; ++nb) {
      if (nb < nc) {
        float s = 0.0f;
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const float4 xv = x4[nb * (kTile / 4) + swizzle4(f0 + j)];
          s += dot4(i8(u[j], 0), i8(u[j], 1), i8(u[j], 2), i8(u[j], 3), xv);
        }
        acc[nb] += s;
      }
    }
  } else if constexpr (F == WeightFormat::int4) {
    // 32 columns = one group: its scale multiplies the group's partial sum
    const float scale = w.scales[rc / kInt4Group];
#pragma unroll
    for (int nb = 0; nb < kMaxN; ++nb) {
      if (nb < nc) {
        float s = 0.0f;
#pragma unroll
        for (int j = 0; j < 8; ++j) {  // float4 j: columns 4j .. 4j+3 = nibbles 4(j%2) .. of word j/2
          const float4 xv = x4[nb * (kTile / 4) + swizzle4(f0 + j)];
          const unsigned word = u[j / 2];
          const int k0 = 4 * (j % 2);
          s += dot4(i4(word, k0), i4(word, k0 + 1), i4(word, k0 + 2), i4(word, k0 + 3), xv);
        }
        acc[nb] += scale * s;
      }
    }
  } else {  // sparse24: words = the kept values of groups g, g+1; one index byte for both
    const unsigned idx = w.index[rc / 8];
    const int a0 = static_cast<int>(idx & 3u), a1 = static_cast<int>((idx >> 2) & 3u);
    const int b0 = static_cast<int>((idx >> 4) & 3u), b1 = static_cast<int>((idx >> 6) & 3u);
#pragma unroll
    for (int nb = 0; nb < kMaxN; ++nb) {
      if (nb < nc) {
        const float4 xa = x4[nb * (kTile / 4) + swizzle4(f0)];
        const float4 xb = x4[nb * (kTile / 4) + swizzle4(f0 + 1)];
        acc[nb] += __uint_as_float(u[0]) * component(xa, a0) + __uint_as_float(u[1]) * component(xa, a1) +
                   __uint_as_float(u[2]) * component(xb, b0) + __uint_as_float(u[3]) * component(xb, b1);
      }
    }
  }
}

// Block: kRowWarps output rows, one per warp. For each pass of up to kMaxN input rows and each
// tile of kTile columns: the block stages x[pass rows, tile] in shared memory, then each warp
// walks its row's part of the tile. vec: the row takes 16-byte loads (else one weight per
// lane per step). Warps past the last row still stage x and reach every barrier.
template <WeightFormat F>
__global__ void __launch_bounds__(kRowBlock)
    matvec_v2_kernel(float* y, const float* x, WeightsView w, const float* bias, int n, bool vec) {
  constexpr int W = cols_per_load<F>();
  float* xs = dynamic_shared<float>();  // (kMaxN, kTile), swizzled per row
  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int r = static_cast<int>(blockIdx.x) * kRowWarps + warp;
  const bool active = r < w.rows;
  const int cols = w.cols;
  for (int n0 = 0; n0 < n; n0 += kMaxN) {
    const int nc = min(kMaxN, n - n0);
    float acc[kMaxN];
#pragma unroll
    for (int nb = 0; nb < kMaxN; ++nb) acc[nb] = 0.0f;
    for (int t0 = 0; t0 < cols; t0 += kTile) {
      const int tw = min(kTile, cols - t0);
      __syncthreads();  // every warp is done with the previous tile
      for (int e = static_cast<int>(threadIdx.x); e < nc * tw; e += kRowBlock) {
        const int nb = e / tw, c = e % tw;
        xs[nb * kTile + swizzle(c)] = x[static_cast<size_t>(n0 + nb) * static_cast<size_t>(cols) + static_cast<size_t>(t0 + c)];
      }
      __syncthreads();
      if (!active) continue;
      if (vec) {
        for (int c = lane * W; c < tw; c += 32 * W) chunk_dot<F>(acc, w, r, t0 + c, c, xs, nc);
      } else {
        for (int c = lane; c < tw; c += 32) {
          const float wv = weight_at(w, r, t0 + c);
#pragma unroll
          for (int nb = 0; nb < kMaxN; ++nb) {
            if (nb < nc) acc[nb] += wv * xs[nb * kTile + swizzle(c)];
          }
        }
      }
    }
    if (!active) continue;
    // int8 on the 16-byte path left the row's scale out (the scalar path applied it per weight)
    const float row_scale = (F == WeightFormat::int8 && vec) ? w.scales[r] : 1.0f;
    const float b = bias != nullptr ? bias[r] : 0.0f;
#pragma unroll
    for (int nb = 0; nb < kMaxN; ++nb) {
      if (nb < nc) {
        const float s = warp_sum(acc[nb]);  // nc is the same for every lane
        if (lane == 0) y[static_cast<size_t>(n0 + nb) * static_cast<size_t>(w.rows) + static_cast<size_t>(r)] = row_scale * s + b;
      }
    }
  }
}

// ---- w8a8: int8 activations, integer dot products ---------------------------------------------

// Block b quantises row b of x (n, cols): sx[b] = max |x| / 127, qx[b, c] = clamp(rint(x[b, c]
// * (1 / sx[b])), -127, 127), 0 for an all-zero row (kernels::quantize_rows_int8). The max is
// exact in any order; the divisions are IEEE (nvcc's default -prec-div=true); a product alone
// before rint cannot be contracted into an FMA.
__global__ void __launch_bounds__(kBlock) quantize_rows_kernel(int8_t* qx, float* sx, const float* x, int cols) {
  __shared__ float warp_max[kBlock / 32];
  __shared__ float row_scale;
  const int t = static_cast<int>(threadIdx.x);
  const float* xb = x + static_cast<size_t>(blockIdx.x) * static_cast<size_t>(cols);
  float m = 0.0f;
  for (int c = t; c < cols; c += kBlock) m = fmaxf(m, fabsf(xb[c]));
  for (int offset = 16; offset > 0; offset /= 2) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, offset));
  if (t % 32 == 0) warp_max[t / 32] = m;
  __syncthreads();
  if (t == 0) {
    float amax = 0.0f;
    for (int i = 0; i < kBlock / 32; ++i) amax = fmaxf(amax, warp_max[i]);
    row_scale = amax / 127.0f;
    sx[blockIdx.x] = row_scale;
  }
  __syncthreads();
  const float s = row_scale;
  const float inv = s > 0.0f ? 1.0f / s : 0.0f;
  int8_t* qb = qx + static_cast<size_t>(blockIdx.x) * static_cast<size_t>(cols);
  for (int c = t; c < cols; c += kBlock) {
    const float v = fminf(fmaxf(rintf(xb[c] * inv), -127.0f), 127.0f);
    qb[c] = static_cast<int8_t>(static_cast<int>(v));
  }
}

// y = sx * sw * dot + bias, each operation rounded on its own (kernels/decode.cpp's w8a8_output).
__device__ __forceinline__ float w8a8_output(float sx, float sw, int dot, const float* bias, int r) {
  const float v = __fmul_rn(__fmul_rn(sx, sw), static_cast<float>(dot));
  return bias != nullptr ? __fadd_rn(v, bias[r]) : v;
}

// c + the four products of the signed bytes of a and b: __dp4a where the GPU has it (6.1),
// four multiply-adds otherwise (the same int32).
__device__ __forceinline__ int dot4_i8(int a, int b, int c) {
#if NNLAB_CUDA_SM_AT_LEAST(NNLAB_SM_PASCAL)
  return __dp4a(a, b, c);
#else
#pragma unroll
  for (int l = 0; l < 4; ++l) {
    c += static_cast<int>(static_cast<int8_t>(static_cast<unsigned>(a) >> (8 * l) & 0xFFu)) *
         static_cast<int>(static_cast<int8_t>(static_cast<unsigned>(b) >> (8 * l) & 0xFFu));
  }
  return c;
#endif
}

// v1: thread (b, r) sums qx[b, c] q[r, c] over c in an int32 loop.
__global__ void matvec_w8a8_v1_kernel(float* y, const int8_t* qx, const float* sx, WeightsView w, const float* bias,
                                      int n) {
  const size_t item = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;  // b * rows + r
  if (item >= static_cast<size_t>(n) * static_cast<size_t>(w.rows)) return;
  const int b = static_cast<int>(item / static_cast<size_t>(w.rows));
  const int r = static_cast<int>(item % static_cast<size_t>(w.rows));
  const size_t cols = static_cast<size_t>(w.cols);
  const int8_t* qb = qx + static_cast<size_t>(b) * cols;
  const int8_t* wr = static_cast<const int8_t*>(w.data) + static_cast<size_t>(r) * cols;
  int dot = 0;
  for (size_t c = 0; c < cols; ++c) dot += static_cast<int>(qb[c]) * static_cast<int>(wr[c]);
  y[item] = w8a8_output(sx[b], w.scales[r], dot, bias, r);
}

// v2: a warp per output row r, up to kMaxN input rows per pass. vec: 16-byte loads of the
// weights and of qx (cols % 16 == 0, both 16-byte aligned), four __dp4a per input row per
// load; else one byte each per lane per step. The 32 lanes' int32 sums: a butterfly (exact).
__global__ void __launch_bounds__(kRowBlock)
    matvec_w8a8_v2_kernel(float* y, const int8_t* qx, const float* sx, WeightsView w, const float* bias, int n,
                          bool vec) {
  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int r = static_cast<int>(blockIdx.x) * kRowWarps + warp;
  if (r >= w.rows) return;  // a whole warp: no block-wide barriers below
  const size_t cols = static_cast<size_t>(w.cols);
  const int8_t* wr = static_cast<const int8_t*>(w.data) + static_cast<size_t>(r) * cols;
  for (int n0 = 0; n0 < n; n0 += kMaxN) {
    const int nc = min(kMaxN, n - n0);
    int acc[kMaxN];
#pragma unroll
    for (int nb = 0; nb < kMaxN; ++nb) acc[nb] = 0;
    if (vec) {
      for (size_t c = static_cast<size_t>(lane) * 16; c < cols; c += 32 * 16) {
        const int4 wv = *reinterpret_cast<const int4*>(wr + c);
#pragma unroll
        for (int nb = 0; nb < kMaxN; ++nb) {
          if (nb < nc) {
            const int4 xv = *reinterpret_cast<const int4*>(qx + static_cast<size_t>(n0 + nb) * cols + c);
            acc[nb] = dot4_i8(wv.x, xv.x, dot4_i8(wv.y, xv.y, dot4_i8(wv.z, xv.z, dot4_i8(wv.w, xv.w, acc[nb]))));
          }
        }
      }
    } else {
      for (size_t c = static_cast<size_t>(lane); c < cols; c += 32) {
        const int wq = wr[c];
#pragma unroll
        for (int nb = 0; nb < kMaxN; ++nb) {
          if (nb < nc) acc[nb] += wq * static_cast<int>(qx[static_cast<size_t>(n0 + nb) * cols + c]);
        }
      }
    }
#pragma unroll
    for (int nb = 0; nb < kMaxN; ++nb) {
      if (nb < nc) {
        int s = acc[nb];
        for (int offset = 16; offset > 0; offset /= 2) s += __shfl_xor_sync(0xffffffffu, s, offset);
        if (lane == 0) {
          y[static_cast<size_t>(n0 + nb) * static_cast<size_t>(w.rows) + static_cast<size_t>(r)] =
              w8a8_output(sx[n0 + nb], w.scales[r], s, bias, r);
        }
      }
    }
  }
}

// ---- attention_decode ------------------------------------------------------------------------

// v1, step 1: one thread per float of the new rows: k, v of qkv (B, n, C + 2 KV) into the
// caches (B, maxT, KV).
__global__ void append_kv_kernel(float* kcache, float* vcache, const float* qkv, int B, int n, int pos, int C, int KV,
                                 int maxT) {
  const size_t e = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;  // (b * n + i) * KV + c
  const size_t uC = static_cast<size_t>(C), uKV = static_cast<size_t>(KV), width = uC + 2 * uKV;
  if (e >= static_cast<size_t>(B) * static_cast<size_t>(n) * uKV) return;
  const size_t bi = e / uKV, c = e % uKV;
  const size_t b = bi / static_cast<size_t>(n), i = bi % static_cast<size_t>(n);
  const size_t at = (b * static_cast<size_t>(maxT) + static_cast<size_t>(pos) + i) * uKV + c;
  kcache[at] = qkv[bi * width + uC + c];
  vcache[at] = qkv[bi * width + uC + uKV + c];
}

// v1, step 2: thread (b, i, h) over the (already appended) caches, three passes.
__global__ void attention_decode_v1_kernel(float* out, const float* kcache, const float* vcache, const float* qkv,
                                           int B, int n, int pos, int C, int NH, int NKV, int maxT) {
  const size_t item = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;  // (b * n + i) * NH + h
  if (item >= static_cast<size_t>(B) * static_cast<size_t>(n) * static_cast<size_t>(NH)) return;
  const int h = static_cast<int>(item % static_cast<size_t>(NH));
  const size_t bi = item / static_cast<size_t>(NH);
  const int i = static_cast<int>(bi % static_cast<size_t>(n));
  const size_t b = bi / static_cast<size_t>(n);
  const int hs = C / NH;
  const size_t uC = static_cast<size_t>(C), off = static_cast<size_t>(h) * static_cast<size_t>(hs);
  const size_t uKV = static_cast<size_t>(NKV) * static_cast<size_t>(hs);
  const size_t kvoff = static_cast<size_t>(h / (NH / NKV)) * static_cast<size_t>(hs);  // its KV head
  const float scale = 1.0f / sqrtf(static_cast<float>(hs));
  const float* q = qkv + bi * (uC + 2 * uKV) + off;
  const float* kb = kcache + b * static_cast<size_t>(maxT) * uKV + kvoff;  // row t at kb + t * KV
  const float* vb = vcache + b * static_cast<size_t>(maxT) * uKV + kvoff;
  float* o = out + bi * uC + off;
  const int len = pos + i + 1;
  float mx = -FLT_MAX;
  for (int t = 0; t < len; ++t) {
    float d = 0.0f;
    for (int j = 0; j < hs; ++j) d += q[j] * kb[static_cast<size_t>(t) * uKV + j];
    mx = fmaxf(mx, d * scale);
  }
  for (int j = 0; j < hs; ++j) o[j] = 0.0f;
  float sum = 0.0f;
  for (int t = 0; t < len; ++t) {
    float d = 0.0f;
    for (int j = 0; j < hs; ++j) d += q[j] * kb[static_cast<size_t>(t) * uKV + j];
    const float p = expf(d * scale - mx);
    sum += p;
    for (int j = 0; j < hs; ++j) o[j] += p * vb[static_cast<size_t>(t) * uKV + j];
  }
  for (int j = 0; j < hs; ++j) o[j] /= sum;
}

constexpr int kHeadWarps = 4;              // v2: warps (= (b, i, h) items) per block
constexpr int kChunk = 256;                // v2: positions per chunk (scores in shared memory)
constexpr int kMaxDimsPerLane = 8;         // v2: hs <= 256

// v2: warp (b, i, h). Shared memory per warp: q * scale (hs floats), then the chunk's scores.
// vec4: hs % 4 == 0 and the caches and qkv 16-byte aligned (C % 4 == 0 too): float4 k reads.
__global__ void __launch_bounds__(kHeadWarps * 32)
    attention_decode_v2_kernel(float* out, float* kcache, float* vcache, const float* qkv, int B, int n, int pos,
                               int C, int NH, int NKV, int maxT, bool vec4) {
  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const size_t item = static_cast<size_t>(blockIdx.x) * kHeadWarps + static_cast<size_t>(warp);
  if (item >= static_cast<size_t>(B) * static_cast<size_t>(n) * static_cast<size_t>(NH)) return;  // whole warps
  const int h = static_cast<int>(item % static_cast<size_t>(NH));
  const size_t bi = item / static_cast<size_t>(NH);
  const int i = static_cast<int>(bi % static_cast<size_t>(n));
  const size_t b = bi / static_cast<size_t>(n);
  const int hs = C / NH, group = NH / NKV;
  const size_t uC = static_cast<size_t>(C), off = static_cast<size_t>(h) * static_cast<size_t>(hs);
  const size_t uKV = static_cast<size_t>(NKV) * static_cast<size_t>(hs), width = uC + 2 * uKV;
  const size_t kvoff = static_cast<size_t>(h / group) * static_cast<size_t>(hs);  // its KV head's slice
  const bool appends = h % group == 0;  // the group's first query head writes the group's k, v
  const float* row = qkv + bi * width;  // this query's q, k, v
  float* qs = dynamic_shared<float>() + static_cast<size_t>(warp) * static_cast<size_t>(hs + kChunk);
  float* scores = qs + hs;

  // Append this head's slice of the new k, v rows; stage q / sqrt(hs).
  const float scale = 1.0f / sqrtf(static_cast<float>(hs));
  const size_t at = (b * static_cast<size_t>(maxT) + static_cast<size_t>(pos + i)) * uKV + kvoff;
  for (int j = lane; j < hs; j += 32) {
    if (appends) {
      kcache[at + j] = row[uC + kvoff + j];
      vcache[at + j] = row[uC + uKV + kvoff + j];
    }
    qs[j] = row[off + j] * scale;
  }
  __syncwarp();

  // Position t's k (or v: +C): the cache below pos (never written by this launch), qkv's new
  // rows from pos on (another warp may be writing them to the cache right now).
  auto key = [&](int t) -> const float* {
    return t < pos ? kcache + (b * static_cast<size_t>(maxT) + static_cast<size_t>(t)) * uKV + kvoff
                   : qkv + (b * static_cast<size_t>(n) + static_cast<size_t>(t - pos)) * width + uC + kvoff;
  };
  auto value = [&](int t) -> const float* {
    return t < pos ? vcache + (b * static_cast<size_t>(maxT) + static_cast<size_t>(t)) * uKV + kvoff
                   : qkv + (b * static_cast<size_t>(n) + static_cast<size_t>(t - pos)) * width + uC + uKV + kvoff;
  };

  float m = -FLT_MAX, s = 0.0f;  // the running (max, sum) over the chunks so far
  float acc[kMaxDimsPerLane];    // acc[d]: dimension lane + 32 d of the running sum of p v
#pragma unroll
  for (int d = 0; d < kMaxDimsPerLane; ++d) acc[d] = 0.0f;
  const int len = pos + i + 1;
  for (int t0 = 0; t0 < len; t0 += kChunk) {
    const int cl = min(kChunk, len - t0);
    // 1. scores, lanes over positions; each lane's (max, sum) of its own
    float cm = -FLT_MAX, cs = 0.0f;
    for (int tt = lane; tt < cl; tt += 32) {
      const float* k = key(t0 + tt);
      float dot = 0.0f;
      if (vec4) {
        const float4* k4 = reinterpret_cast<const float4*>(k);
        const float4* q4 = reinterpret_cast<const float4*>(qs);
        for (int j = 0; j < hs / 4; ++j) dot += dot4(k4[j].x, k4[j].y, k4[j].z, k4[j].w, q4[j]);
      } else {
        for (int j = 0; j < hs; ++j) dot += qs[j] * k[j];
      }
      scores[tt] = dot;
      online_add(cm, cs, dot);
    }
    // 2. the warp's pair for the chunk, merged into the running one
    warp_merge(cm, cs);
    const float m_old = m;
    online_merge(m, s, cm, cs);
    const float rescale = expf(m_old - m);  // the old terms were relative to m_old (0 on the first chunk)
    __syncwarp();                           // every lane's scores are in shared memory
    // 3. lanes over the head dimension: acc = acc * rescale + sum_t exp(score_t - m) v_t
#pragma unroll
    for (int d = 0; d < kMaxDimsPerLane; ++d) acc[d] *= rescale;
    for (int tt = 0; tt < cl; ++tt) {
      const float p = expf(scores[tt] - m);
      const float* v = value(t0 + tt);
#pragma unroll
      for (int d = 0; d < kMaxDimsPerLane; ++d) {
        const int j = lane + 32 * d;
        if (j < hs) acc[d] += p * v[j];
      }
    }
    __syncwarp();  // done reading the scores before the next chunk writes them
  }
  float* o = out + bi * uC + off;
#pragma unroll
  for (int d = 0; d < kMaxDimsPerLane; ++d) {
    const int j = lane + 32 * d;
    if (j < hs) o[j] = acc[d] / s;
  }
}

// The launchers' argument checks (Error, naming the op and the problem).
void check_matvec(const char* op, const WeightsView& w, int n) {
  if (n < 0 || w.rows < 0 || w.cols < 0) {
    throw Error(std::string(op) + ": negative size (rows " + std::to_string(w.rows) + ", cols " +
                std::to_string(w.cols) + ", n " + std::to_string(n) + ")");
  }
  if (w.format == WeightFormat::w8a8 && w.cols > 65536) {  // int32 sums of cols products up to 127^2
    throw Error(std::string(op) + ": a w8a8 matrix cannot have more than 65536 columns (int32 sums), not " +
                std::to_string(w.cols));
  }
  if ((w.format == WeightFormat::int4 && w.cols % kInt4Group != 0) || (w.format == WeightFormat::sparse24 && w.cols % 8 != 0)) {
    throw Error(std::string(op) + ": a " + format_name(w.format) + " matrix cannot have " + std::to_string(w.cols) +
                " columns (kernels::check_packable)");
  }
  if (static_cast<size_t>(n) * static_cast<size_t>(w.rows) > static_cast<size_t>(INT_MAX) * kBlock) {
    throw Error(std::string(op) + ": n * rows = " + std::to_string(static_cast<size_t>(n) * w.rows) +
                " outputs need more than 2^31 - 1 blocks");
  }
}

void check_attention_decode(const char* op, int B, int n, int pos, int C, int NH, int NKV, int maxT) {
  if (B < 0 || n < 0 || pos < 0 || C < 1 || NH < 1 || C % NH != 0 || NKV < 1 || NH % NKV != 0 || pos + n > maxT) {
    throw Error(std::string(op) + ": bad sizes B=" + std::to_string(B) + " n=" + std::to_string(n) + " pos=" +
                std::to_string(pos) + " C=" + std::to_string(C) + " NH=" + std::to_string(NH) + " NKV=" +
                std::to_string(NKV) + " maxT=" + std::to_string(maxT) +
                " (needs C % NH == 0, NH % NKV == 0 and pos + n <= maxT)");
  }
}

template <WeightFormat F>
void launch_matvec_v2(float* y, const float* x, const WeightsView& w, const float* bias, int n) {
  const size_t row_bytes = format_data_bytes(F, 1, w.cols);
  const bool vec = aligned16(w.data) && row_bytes % 16 == 0;
  const size_t smem = static_cast<size_t>(std::min(n, kMaxN)) * kTile * sizeof(float);
  launch("matvec_v2_kernel", matvec_v2_kernel<F>, dim3(static_cast<unsigned>(ceil_div(w.rows, kRowWarps))),
         dim3(kRowBlock), smem, y, x, w, bias, n, vec);
}

// The quantised input rows of a w8a8 matvec: a device buffer this build keeps and grows
// (cudaFree + cudaMalloc only when a call needs more than any call before), so the launchers
// keep MatvecFn's signature (no workspace argument). Not thread-safe, like the default stream
// every launcher uses.
struct W8a8Scratch {
  int8_t* qx;  // (n, cols), rows 16-byte aligned when cols % 16 == 0
  float* sx;   // (n)
};
W8a8Scratch w8a8_scratch(int n, int cols) {
  static void* buffer = nullptr;
  static size_t capacity = 0;
  const size_t q_bytes = (static_cast<size_t>(n) * static_cast<size_t>(cols) + 255) / 256 * 256;
  const size_t need = q_bytes + static_cast<size_t>(n) * sizeof(float);
  if (need > capacity) {
    if (buffer != nullptr) check(cudaFree(buffer), "matvec w8a8: cudaFree of the quantised-x scratch");
    buffer = nullptr;
    capacity = 0;
    check(cudaMalloc(&buffer, need), "matvec w8a8: cudaMalloc of " + std::to_string(need) + " bytes of scratch");
    capacity = need;
  }
  return {static_cast<int8_t*>(buffer), reinterpret_cast<float*>(static_cast<unsigned char*>(buffer) + q_bytes)};
}

// Step 1 of both versions' w8a8: x (n, cols) -> the scratch's qx, sx.
W8a8Scratch quantize_x(const float* x, int n, int cols) {
  const W8a8Scratch s = w8a8_scratch(n, cols);
  launch("quantize_rows_kernel", quantize_rows_kernel, dim3(static_cast<unsigned>(n)), dim3(kBlock), 0, s.qx, s.sx, x,
         cols);
  return s;
}

}  // namespace

// ---- the launchers ------------------------------------------------------------------------

void matvec_v1(float* y, const float* x, const WeightsView& w, const float* bias, int n) {
  check_matvec("matvec v1", w, n);
  const size_t items = static_cast<size_t>(n) * static_cast<size_t>(w.rows);
  if (items == 0) return;
  if (w.format == WeightFormat::w8a8) {
    if (w.cols == 0) {  // empty dot products: y = bias (or 0), through the same kernel
      launch("matvec_v1_kernel", matvec_v1_kernel, dim3(static_cast<unsigned>((items + kBlock - 1) / kBlock)),
             dim3(kBlock), 0, y, x, w, bias, n);
      return;
    }
    const W8a8Scratch s = quantize_x(x, n, w.cols);
    launch("matvec_w8a8_v1_kernel", matvec_w8a8_v1_kernel, dim3(static_cast<unsigned>((items + kBlock - 1) / kBlock)),
           dim3(kBlock), 0, y, static_cast<const int8_t*>(s.qx), static_cast<const float*>(s.sx), w, bias, n);
    return;
  }
  launch("matvec_v1_kernel", matvec_v1_kernel, dim3(static_cast<unsigned>((items + kBlock - 1) / kBlock)),
         dim3(kBlock), 0, y, x, w, bias, n);
}

void matvec_v2(float* y, const float* x, const WeightsView& w, const float* bias, int n) {
  check_matvec("matvec v2", w, n);
  if (n == 0 || w.rows == 0) return;
  switch (w.format) {
    case WeightFormat::f32: launch_matvec_v2<WeightFormat::f32>(y, x, w, bias, n); break;
    case WeightFormat::bf16: launch_matvec_v2<WeightFormat::bf16>(y, x, w, bias, n); break;
    case WeightFormat::int8: launch_matvec_v2<WeightFormat::int8>(y, x, w, bias, n); break;
    case WeightFormat::int4: launch_matvec_v2<WeightFormat::int4>(y, x, w, bias, n); break;
    case WeightFormat::sparse24: launch_matvec_v2<WeightFormat::sparse24>(y, x, w, bias, n); break;
    case WeightFormat::w8a8: {
      if (w.cols == 0) {  // empty dot products: y = bias (or 0)
        launch_matvec_v2<WeightFormat::int8>(y, x, w, bias, n);
        break;
      }
      const W8a8Scratch s = quantize_x(x, n, w.cols);
      const bool vec = w.cols % 16 == 0 && aligned16(w.data) && aligned16(s.qx);
      launch("matvec_w8a8_v2_kernel", matvec_w8a8_v2_kernel, dim3(static_cast<unsigned>(ceil_div(w.rows, kRowWarps))),
             dim3(kRowBlock), 0, y, static_cast<const int8_t*>(s.qx), static_cast<const float*>(s.sx), w, bias, n, vec);
      break;
    }
  }
}

void attention_decode_v1(float* out, float* kcache, float* vcache, const float* qkv, int B, int n, int pos, int C,
                         int NH, int NKV, int maxT) {
  check_attention_decode("attention_decode v1", B, n, pos, C, NH, NKV, maxT);
  const int KV = C / NH * NKV;
  const size_t appended = static_cast<size_t>(B) * static_cast<size_t>(n) * static_cast<size_t>(KV);
  if (appended == 0) return;
  launch("append_kv_kernel", append_kv_kernel, dim3(static_cast<unsigned>((appended + kBlock - 1) / kBlock)),
         dim3(kBlock), 0, kcache, vcache, qkv, B, n, pos, C, KV, maxT);
  const size_t items = static_cast<size_t>(B) * static_cast<size_t>(n) * static_cast<size_t>(NH);
  launch("attention_decode_v1_kernel", attention_decode_v1_kernel,
         dim3(static_cast<unsigned>((items + kBlock - 1) / kBlock)), dim3(kBlock), 0, out,
         static_cast<const float*>(kcache), static_cast<const float*>(vcache), qkv, B, n, pos, C, NH, NKV, maxT);
}

void attention_decode_v2(float* out, float* kcache, float* vcache, const float* qkv, int B, int n, int pos, int C,
                         int NH, int NKV, int maxT) {
  check_attention_decode("attention_decode v2", B, n, pos, C, NH, NKV, maxT);
  const int hs = C / NH;
  if (hs > 32 * kMaxDimsPerLane) {
    throw Error("attention_decode v2: head size " + std::to_string(hs) + " is more than its " +
                std::to_string(32 * kMaxDimsPerLane) + " (32 lanes x " + std::to_string(kMaxDimsPerLane) +
                " dimensions each)");
  }
  const size_t items = static_cast<size_t>(B) * static_cast<size_t>(n) * static_cast<size_t>(NH);
  if (items == 0) return;
  // k rows start at multiples of KV (cache) and C + 2 KV (qkv): C % 4 == 0 and hs % 4 == 0
  // keep every float4 read aligned
  const bool vec4 = hs % 4 == 0 && aligned16(kcache) && aligned16(qkv) && C % 4 == 0;
  const size_t smem = static_cast<size_t>(kHeadWarps) * static_cast<size_t>(hs + kChunk) * sizeof(float);
  launch("attention_decode_v2_kernel", attention_decode_v2_kernel,
         dim3(static_cast<unsigned>((items + kHeadWarps - 1) / kHeadWarps)), dim3(kHeadWarps * 32), smem, out, kcache,
         vcache, qkv, B, n, pos, C, NH, NKV, maxT, vec4);
}

void add_decode(Kernels& k) {
  k.matvec = {
      {1, "naive", "one thread per (input row, output row), one weight dequantised at a time; uncoalesced",
        matvec_v1, {NNLAB_SM_MAXWELL}},
      {2, "warp per row", "16-byte coalesced loads dequantised in registers, each weight used by up to 8 input "
                              "rows, x in swizzled shared memory, warp_sum; w8a8: __dp4a on int8 x and W",
        matvec_v2, {NNLAB_SM_MAXWELL}},
  };
  k.attention_decode = {
      {1, "naive", "append kernel, then one thread per (b, i, h): max, exp-sum and weighted v in three passes",
        attention_decode_v1, {NNLAB_SM_MAXWELL}},
      {2, "warp per head", "one launch, warp per (b, i, h): lanes over positions, online softmax merged across "
                               "lanes, lanes over the head dimension for v; appends its own slice",
        attention_decode_v2, {NNLAB_SM_MAXWELL}},
  };
}

}  // namespace kernels::cuda::NNLAB_CUDA_NS
